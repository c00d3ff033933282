"""In-memory hybrid index: exact MiniLM cosine + BM25 (bm25s) over typo- and CJK-aware tokens.

Pure computation over records and their embeddings; it knows nothing about Chroma, so the store can
rebuild it from the collection and the tuning/eval code can build it from cached vectors.

Scoring (one formula, used both to rank and as the reported ``score`` so the router's threshold and
top1-top2 margin mean the same thing on every query):

* per record: ``s = (1 - w) * dense + w * lexical`` where ``dense`` is the cosine similarity clipped to
  [0, 1] and ``lexical`` is the record's BM25 score divided by the best BM25 score each query token
  can reach anywhere in the corpus (so 1.0 = every query token matched as well as it ever can). Both
  parts are query-independent scales, unlike min-max or rank normalisation, so scores compare across
  queries.
* per answer: a decaying weighted mean of its best record scores (``decay`` 0 = the best record only;
  larger values reward answers that several paraphrases support, which is what kNN voting buys on
  fine-grained intent sets like Banking77). The mean stays in [0, 1].
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import numpy as np

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Character n-grams of short function words only add noise; the whole word still counts.
_MIN_NGRAM_WORD = 4


def tokenize(text: str, ngram: int = 3) -> list[str]:
    """Word tokens, character n-grams of each word (typo tolerance) and CJK uni/bi-grams.

    Prefixes keep the three kinds apart in the vocabulary ("w:card" vs the trigram "g:car").
    """
    text = unicodedata.normalize("NFKC", text).lower()
    tokens: list[str] = []
    for run in _CJK_RUN.findall(text):
        tokens.extend("c:" + ch for ch in run)
        tokens.extend("c:" + run[i:i + 2] for i in range(len(run) - 1))
    for word in _WORD.findall(_CJK_RUN.sub(" ", text)):
        tokens.append("w:" + word)
        if ngram and len(word) >= _MIN_NGRAM_WORD:
            padded = f"#{word}#"
            tokens.extend("g:" + padded[i:i + ngram] for i in range(len(padded) - ngram + 1))
    return tokens


def has_cjk(text: str) -> bool:
    return bool(_CJK_RUN.search(text))


@dataclass(frozen=True)
class FusionParams:
    """Knobs of the fusion; defaults were chosen on held-out splits of TRAIN data (see evaluate.py)."""

    lexical_weight: float = 0.3
    cjk_lexical_weight: float = 0.6  # MiniLM is English-only; Chinese relies on character overlap
    decay: float = 0.5
    top_m: int = 5
    candidates: int = 200
    ngram: int = 3
    bm25_k1: float = 1.2
    bm25_b: float = 0.75


@dataclass
class AnswerScore:
    answer_id: str
    score: float
    record: int  # index of the best-matching record
    dense: float
    lexical: float


@dataclass
class HybridIndex:
    """Records (one text each, pointing at an answer) with L2-normalised embeddings, searchable."""

    texts: list[str]
    answer_ids: list[str]
    embeddings: np.ndarray
    params: FusionParams = field(default_factory=FusionParams)

    def __post_init__(self) -> None:
        import bm25s

        self.embeddings = np.ascontiguousarray(self.embeddings, dtype=np.float32).reshape(-1, 384)
        if len(self.texts) != len(self.embeddings) or len(self.texts) != len(self.answer_ids):
            raise ValueError("texts, answer_ids and embeddings must have the same length")
        self._answer_index = {a: i for i, a in enumerate(dict.fromkeys(self.answer_ids))}
        self._answer_names = list(self._answer_index)
        self._record_answer = np.array([self._answer_index[a] for a in self.answer_ids], dtype=np.int64)
        self._bm25 = None
        if not self.texts:
            return
        corpus = [tokenize(t, self.params.ngram) or [""] for t in self.texts]
        bm25 = bm25s.BM25(k1=self.params.bm25_k1, b=self.params.bm25_b)
        bm25.index(corpus, show_progress=False)
        data, indptr = bm25.scores["data"], bm25.scores["indptr"]
        # Best score each token reaches in any record: the denominator that puts BM25 on [0, 1].
        token_max = np.zeros(len(indptr) - 1, dtype=np.float32)
        nonempty = np.diff(indptr) > 0
        if data.size:
            token_max[nonempty] = np.maximum.reduceat(data, indptr[:-1][nonempty])
        self._token_max = token_max
        # An unseen query token (typo, order number) could have matched; count it as a typical token.
        self._unseen_weight = float(np.median(token_max[token_max > 0])) if (token_max > 0).any() else 1.0
        self._bm25 = bm25

    def __len__(self) -> int:
        return len(self.texts)

    def lexical_scores(self, query: str) -> np.ndarray:
        """BM25 of every record, normalised to [0, 1] by what the query's tokens could reach."""
        n = len(self.texts)
        tokens = list(dict.fromkeys(tokenize(query, self.params.ngram)))
        if not n or not tokens or self._bm25 is None:
            return np.zeros(n, dtype=np.float32)
        vocab = self._bm25.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        unseen = len(tokens) - len(ids)
        reach = float(self._token_max[ids].sum()) + unseen * self._unseen_weight
        if not ids or reach <= 0:
            return np.zeros(n, dtype=np.float32)
        raw = self._bm25.get_scores_from_ids(ids)
        return np.clip(raw / reach, 0.0, 1.0).astype(np.float32)

    def search(self, query: str, vector: np.ndarray, k: int = 3,
               lexical_weight: float | None = None) -> list[AnswerScore]:
        if not self.texts or k <= 0:
            return []
        p = self.params
        if lexical_weight is None:
            lexical_weight = p.cjk_lexical_weight if has_cjk(query) else p.lexical_weight
        dense = np.clip(self.embeddings @ np.asarray(vector, dtype=np.float32).reshape(-1), 0.0, 1.0)
        lexical = self.lexical_scores(query) if lexical_weight > 0 else np.zeros_like(dense)
        return self.rank(dense, lexical, lexical_weight, k)

    def rank(self, dense: np.ndarray, lexical: np.ndarray, lexical_weight: float, k: int) -> list[AnswerScore]:
        """Fuse per-record dense and lexical scores and aggregate them per answer (see module doc)."""
        p = self.params
        combined = (1.0 - lexical_weight) * dense + lexical_weight * lexical
        n_cand = min(len(combined), max(p.candidates, k * p.top_m))
        cand = np.argpartition(-combined, n_cand - 1)[:n_cand] if n_cand < len(combined) else np.arange(len(combined))
        cand = cand[np.argsort(-combined[cand], kind="stable")]
        # Records are now in descending score order, so each answer's list is its best-first list.
        per_answer: dict[int, list[int]] = {}
        for r in cand.tolist():
            per_answer.setdefault(int(self._record_answer[r]), []).append(r)
        weights = p.decay ** np.arange(p.top_m) if p.decay > 0 else np.array([1.0])
        results = []
        for answer, records in per_answer.items():
            top = combined[records[:len(weights)]]
            w = weights[:len(top)]
            score = float((top * w).sum() / w.sum())
            best = records[0]
            results.append(AnswerScore(self._answer_names[answer], score, best,
                                       float(dense[best]), float(lexical[best])))
        results.sort(key=lambda s: -s.score)
        return results[:k]
