"""Tandem's starter out-of-scope examples: what a shop's FAQ does not answer, given to every knowledge base.

A FAQ lists what it answers, never what it does not, so a message far from every answer is the only sign of an
unanswerable one, and near-domain requests (advice, comparisons, complaints that need a judgement, several steps
at once, other companies' services, chit-chat) sit as close to a shop's questions as its own customers' natural
wording does. ``starter/out_of_scope_en.csv`` holds hand-written messages of those kinds; the index reads them as
out-of-scope examples (``oos_gap``, ``oos_knn`` in :meth:`knowledge.index.HybridIndex.evidence_of`), never as hits.

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

STARTER_FILE = Path(__file__).resolve().parent / "starter" / "out_of_scope_en.csv"
# Chosen on the demo shop and the Bitext FAQ (train questions): at 0.8 the demo's product-care, sizing and
# warranty answers drop the advice examples they answer, and the Bitext FAQ keeps all but a few.
CONFLICT_COSINE = 0.8

_vectors: dict[str, np.ndarray] = {}  # per encoder: a KB reload must not embed them again
_lock = threading.Lock()


@cache
def starter_texts() -> tuple[str, ...]:
    with STARTER_FILE.open(encoding="utf-8", newline="") as handle:
        return tuple(row["query"].strip() for row in csv.DictReader(handle) if (row.get("query") or "").strip())


def starter_vectors(encoder: Encoder) -> np.ndarray:
    """The starter examples embedded by ``encoder``, once per encoder version in this process."""
    key = f"{encoder.name}:{encoder.version}:{encoder.backend}"  # int8 ONNX keeps its torch folder's version
    with _lock:
        if key not in _vectors:
            _vectors[key] = np.asarray(encoder.encode_passages(list(starter_texts())), dtype=np.float32)
        return _vectors[key]


def unanswered(starter: np.ndarray, records: np.ndarray, cutoff: float = CONFLICT_COSINE) -> np.ndarray:
    """The rows of ``starter`` that no record of the KB comes within ``cutoff`` cosine of."""
    if not len(records) or not len(starter):
        return starter
    nearest = np.einsum("ij,kj->ik", starter, records).max(axis=1)
    return starter[nearest < cutoff]
