"""Tandem's starter out-of-scope examples: what a shop's FAQ does not answer, given to every knowledge base.

A FAQ lists what it answers, never what it does not, so a message far from every answer is the only sign of an
unanswerable one, and near-domain requests (advice, comparisons, complaints that need a judgement, several steps
at once, other companies' services, chit-chat) sit as close to a shop's questions as its own customers' natural
wording does. ``starter/out_of_scope_en.csv`` holds hand-written messages of those kinds; the index reads them as
out-of-scope examples (``starter_gap``, ``starter_knn`` in :meth:`knowledge.index.HybridIndex.evidence_of`), never as
hits, in every vector space the KB searches. ``starter/out_of_scope_zh.csv`` translates them row for row: a Chinese
message, searched in the e5 space, meets them in its own language there.

A shop's FAQ may answer some of them (the demo shop has product care and sizing answers), so an example is left
out for a KB when one of the KB's own records comes within :data:`CONFLICT_COSINE` of it: that KB answers it.
Operators' own out-of-scope rows are never left out. ``FusionParams.starter_examples`` turns the set off (intent
benchmarks such as CLINC150, whose small-talk and banking intents are what the set calls out of scope).
"""

from __future__ import annotations

import csv
import threading
from functools import cache
from pathlib import Path

import numpy as np

from core.encoders import Encoder

STARTER_DIR = Path(__file__).resolve().parent / "starter"
STARTER_FILE = STARTER_DIR / "out_of_scope_en.csv"  # the set itself; other languages' files translate it
# Row i of a translation says what row i of the English file says, so a KB keeps or leaves out both together: what
# it answers is decided once, in its primary space (see unanswered).
TRANSLATIONS = {"zh": STARTER_DIR / "out_of_scope_zh.csv"}
# Chosen on the demo shop and the Bitext FAQ (train questions): at 0.8 the demo's product-care, sizing and
# warranty answers drop the advice examples they answer, and the Bitext FAQ keeps all but a few.
CONFLICT_COSINE = 0.8

_vectors: dict[str, np.ndarray] = {}  # per encoder and language: a KB reload must not embed them again
_lock = threading.Lock()


@cache
def starter_texts(language: str = "en") -> tuple[str, ...]:
    """The starter examples in ``language`` (``en``, or a language in :data:`TRANSLATIONS`), in the file's order."""
    path = STARTER_FILE if language == "en" else TRANSLATIONS[language]
    with path.open(encoding="utf-8", newline="") as handle:
        return tuple(row["query"].strip() for row in csv.DictReader(handle) if (row.get("query") or "").strip())


def starter_vectors(encoder: Encoder, language: str = "en") -> np.ndarray:
    """The starter examples in ``language`` embedded by ``encoder``, once per encoder version in this process."""
    key = f"{encoder.passage_identity}:{language}"  # with the backend: int8 ONNX keeps its torch folder's version
    with _lock:
        if key not in _vectors:
            _vectors[key] = np.asarray(encoder.encode_passages(list(starter_texts(language))), dtype=np.float32)
        return _vectors[key]


def space_starter(encoder: Encoder, language: str, kept: np.ndarray) -> np.ndarray:
    """The kept starter examples for one language's vector space: the English rows, and that language's translation
    of them when there is one (a Chinese message meets Chinese examples, not only cross-lingual English ones)."""
    rows = [starter_vectors(encoder)[kept]]
    if language in TRANSLATIONS:
        rows.append(starter_vectors(encoder, language)[kept])
    return np.concatenate(rows)


def unanswered(starter: np.ndarray, records: np.ndarray, cutoff: float = CONFLICT_COSINE) -> np.ndarray:
    """Which rows of ``starter`` no record of the KB comes within ``cutoff`` cosine of (a boolean mask).

    A mask, not the rows: a KB decides once, in its primary space, which examples it answers, and keeps the same
    ones in every language's space (e5's cosines run higher than MiniLM's, so the cutoff means something else there).
    """
    if not len(records) or not len(starter):
        return np.ones(len(starter), dtype=bool)
    return np.einsum("ij,kj->ik", starter, records).max(axis=1) < cutoff
