"""Which attribute of a product answers a question: the one ranking that product facts in the chat and
`tandem catalog rank-attributes` (semiPQA's attribute-ranking format) both use.

Each candidate attribute is a (name, value) pair. Three signals, fused by a weighted sum:

* ``dense``: MiniLM cosine between the question and "name: value";
* ``name``: MiniLM cosine between the question and the attribute's name alone (the value may be a number or a
  brand, which says little about what the attribute is);
* ``overlap``: the share of the question's content words found in the name or value (light stemming).

The weights (:data:`WEIGHTS`) were chosen by 5-fold cross-validation on semiPQA's development split only (see
docs/catalog.md for the measured precision@1 of each signal alone and fused).
"""

from __future__ import annotations

import csv
import re
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from core.encoders import Encoder

_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")
_STOP = frozenset(["a", "an", "the", "is", "are", "was", "were", "be", "been", "do", "does", "did", "this", "that", "these",
                   "those", "it", "its", "it's", "of", "for", "to", "in", "on", "at", "by", "with", "from", "and", "or", "as",
                   "if", "can", "will", "would", "could", "should", "what", "which", "who", "how", "much", "many", "any",
                   "there", "their", "they", "them", "my", "me", "i", "you", "your", "we", "our", "us", "have", "has", "had",
                   "not", "no", "yes", "so", "than", "then", "too", "very", "just", "about", "into", "out", "up", "down", "off",
                   "over", "under", "does", "doesn't", "dont", "don't", "isn't", "it", "come", "comes", "get", "use", "used",
                   "using", "also", "other", "such", "one", "ones"])
_SEMIPQA_NOISE = re.compile(r"\b(normalized_value|value|unit|language_tag|marketplace_id)\s*:", re.I)

# (dense, name, overlap): 5-fold CV on semiPQA dev, see docs/catalog.md
WEIGHTS = (0.6, 0.3, 0.1)
METHODS = ("overlap", "dense", "fused")


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    words = _WORD.findall(text.lower().replace("_", " "))
    return {_stem(w) for w in words if w not in _STOP}


def candidate_text(name: str, value: str) -> str:
    return f"{name.replace('_', ' ')}: {value}"


def semipqa_candidate(candidate: str) -> tuple[str, str]:
    """``brand:  { value:"and1" }`` -> ("brand", "and1"): the attribute's name and its values as plain words."""
    name, _, rest = candidate.partition(":")
    rest = _SEMIPQA_NOISE.sub(" ", rest)
    rest = re.sub(r"[{}\[\]\";]+", " ", rest)
    rest = re.sub(r"\s*,\s*", ", ", rest)
    return name.strip(), " ".join(rest.split()).strip(" ,")


def overlap_scores(question: str, candidates: Sequence[tuple[str, str]]) -> np.ndarray:
    words = content_words(question)
    if not words:
        return np.zeros(len(candidates), dtype=np.float32)
    return np.asarray([len(words & content_words(candidate_text(n, v))) / len(words) for n, v in candidates],
                      dtype=np.float32)


def signals(question: str, candidates: Sequence[tuple[str, str]], encoder: Encoder,
            embed: Callable[[list[str]], np.ndarray] | None = None) -> np.ndarray:
    """(len(candidates), 3): dense, name and overlap per candidate. ``embed`` embeds stored texts (default: the
    encoder's passage call); a batch caller passes one that looks up vectors it made in one pass."""
    if not candidates:
        return np.zeros((0, 3), dtype=np.float32)
    embed = embed or (lambda texts: encoder.encode_passages(texts))
    q = encoder.encode_query(question)
    full = embed([candidate_text(n, v) for n, v in candidates])
    names = embed([n.replace("_", " ") for n, _ in candidates])
    return np.stack([full @ q, names @ q, overlap_scores(question, candidates)], axis=1).astype(np.float32)


def fuse(features: np.ndarray, method: str = "fused", weights: Sequence[float] = WEIGHTS) -> np.ndarray:
    if method == "overlap":
        return features[:, 2]
    if method == "dense":
        return features[:, 0]
    if method != "fused":
        raise ValueError(f"unknown ranking method '{method}' (one of {', '.join(METHODS)})")
    return features @ np.asarray(weights, dtype=np.float32)


def rank_attributes(question: str, candidates: Sequence[tuple[str, str]], encoder: Encoder, method: str = "fused",
                    embed: Callable[[list[str]], np.ndarray] | None = None) -> list[tuple[int, float]]:
    """(candidate index, score) best first; ties keep the candidates' order."""
    scores = fuse(signals(question, candidates, encoder, embed), method)
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [(int(i), float(scores[i])) for i in order]


def candidate_texts(candidates: Sequence[tuple[str, str]]) -> list[str]:
    """Every stored text :func:`signals` embeds for these candidates (for a batch caller to embed in one pass)."""
    return [candidate_text(n, v) for n, v in candidates] + [n.replace("_", " ") for n, _ in candidates]


def read_semipqa(path: Path) -> OrderedDict[str, dict]:
    """semiPQA's attribute-ranking TSV: qid -> {"question", "pairs": [qa_pair_id...], "candidates": [(name,
    value)...], "labels": [int...]} (labels empty when the file has no label column)."""
    csv.field_size_limit(sys.maxsize)
    questions: OrderedDict[str, dict] = OrderedDict()
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            entry = questions.setdefault(row["qid"], {"question": row["question"], "pairs": [], "candidates": [],
                                                      "labels": []})
            entry["pairs"].append(row["qa_pair_id"])
            entry["candidates"].append(semipqa_candidate(row["candidate"]))
            if row.get("label") not in (None, ""):
                entry["labels"].append(int(row["label"]))
    return questions


def rank_semipqa(questions: OrderedDict[str, dict], encoder: Encoder,
                 method: str = "fused") -> Iterator[tuple[str, dict, list[tuple[int, float]]]]:
    """(qid, entry, ranking) per question of :func:`read_semipqa`, every distinct candidate text embedded once."""
    texts = list(dict.fromkeys(t for entry in questions.values() for t in candidate_texts(entry["candidates"])))
    vectors = dict(zip(texts, encoder.encode_passages(texts))) if method != "overlap" else {}

    def embed(batch: list[str]) -> np.ndarray:
        return np.stack([vectors[t] for t in batch]) if vectors else np.zeros((len(batch), encoder.dim), np.float32)

    for qid, entry in questions.items():
        yield qid, entry, rank_attributes(entry["question"], entry["candidates"], encoder, method=method, embed=embed)


def precision_at_1(questions: OrderedDict[str, dict], encoder: Encoder, method: str = "fused") -> tuple[float, int]:
    """Precision@1 over the labelled questions with at least one relevant attribute, and how many there were."""
    hits = judged = 0
    for _, entry, ranked in rank_semipqa(questions, encoder, method):
        labels = entry["labels"]
        if len(labels) == len(entry["pairs"]) and any(labels):
            judged += 1
            hits += labels[ranked[0][0]]
    return (hits / judged if judged else 0.0), judged
