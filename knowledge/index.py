"""In-memory hybrid index: exact encoder cosine + BM25 (bm25s) over typo- and CJK-aware tokens (:mod:`knowledge.tokens`).

Pure computation over records and their embeddings; it knows nothing about Chroma, so the store can
rebuild it from the collection and the tuning/eval code can build it from cached vectors.

Scoring (one formula, used both to rank and as the reported ``score`` so the router's threshold and
top1-top2 margin mean the same thing on every query):

* per record: ``s = (1 - w) * dense + w * lexical``. ``dense`` is the cosine similarity clipped to
  [0, 1]. ``lexical`` blends two BM25 indexes, whole words (plus CJK character uni/bi-grams) and
  character trigrams of words (typos), each divided by the best score the query's tokens can reach
  anywhere in the corpus, so 1.0 means every query token matched as well as it ever can. Both parts
  are on query-independent scales (unlike min-max or rank fusion), so scores compare across queries.
  ``w`` is higher for queries with CJK characters, where the English MiniLM is nearly blind.
* per answer: a decaying weighted mean of its best record and its next best *example questions*
  (``decay`` 0 = the best record only). Several close paraphrases lift an answer (kNN voting, which
  helps on fine-grained intents like Banking77); an answer with no paraphrases keeps its best score.
* blended with the answer head (:class:`AnswerHead`): a softmax regression over the answers, fitted on the
  KB's own records when the index is built (half a second for 5,000 questions). Nearest neighbours judge a
  message by its closest paraphrases; the head weighs every paraphrase of every answer at once, so a message
  worded unlike any single stored question still lands where its words point. ``score = (fusion +
  head_weight * p_head) / (1 + head_weight)`` stays on [0, 1]. Where the lexical weight is raised above the
  default because the encoder cannot read the script, the head's weight shrinks in the same proportion.

Defaults come from a grid search on 80/20 splits of the Banking77 and Bitext TRAIN files only:
dev top-1 went from 0.911 (dense max) to 0.923 on Banking77 and from 0.970 to 0.989 on Bitext; the
optimum is flat (w 0.2-0.4, decay 0.6-1.0 within 0.002). The head's weight was chosen the same way, base
encoder, 80/20 splits of TRAIN, and on the hand-written Bitext development set with the tuned encoder (top-1
without the head / with it): Banking77 0.916 / 0.923, CLINC150 0.947 / 0.973, Bitext dev 0.824 / 0.864;
weights 0.2-0.5 are within 0.005 of the best on all three.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.text import has_cjk
from knowledge.tokens import ngram_tokens, word_tokens


@dataclass(frozen=True)
class FusionParams:
    """Knobs of the fusion; defaults were chosen on held-out splits of TRAIN data (see evaluate.py)."""

    lexical_weight: float = 0.3
    # MiniLM is English-only, so Chinese relies on character overlap (set on the demo's Chinese questions).
    cjk_lexical_weight: float = 0.9
    # In a multilingual encoder's space (e5 for Chinese) the vectors carry the meaning: measured on the Chinese
    # train/valid messages, top-1 0.82 at 0.1-0.15 against 0.71 at 0.9 and 0.76 with no lexical part.
    space_cjk_lexical_weight: float = 0.15
    ngram_weight: float = 0.2  # share of the character n-gram index in the lexical score (typos)
    search_focus: bool = True  # mend typos and drop declined wishes before searching (knowledge.focus)
    decay: float = 0.6
    top_m: int = 3
    candidates: int = 200
    ngram: int = 3
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    # chars (character uni+bigrams) or jieba (its words + characters): equal top-1 at the chosen weight on the
    # Chinese train/valid messages (0.815 both), chars better at higher weights and 0.5 vs 0.8 ms a query.
    cjk_segmenter: str = "chars"
    head_weight: float = 0.2  # share of the answer head (0 = nearest neighbours and BM25 only)
    head_c: float = 10.0      # inverse L2 strength of the head's softmax regression
    # Tandem's starter out-of-scope examples (knowledge.starter_examples) next to the KB's own, in every space.
    starter_examples: bool = True


@dataclass
class AnswerScore:
    answer_id: str
    score: float
    record: int  # index of the best-matching record
    dense: float
    lexical: float


class _BM25:
    """One bm25s index whose scores are put on [0, 1] by what the query's tokens can reach."""

    def __init__(self, corpus: list[list[str]], k1: float, b: float):
        import bm25s

        self.n = len(corpus)
        self.bm25 = bm25s.BM25(k1=k1, b=b)
        self.bm25.index([tokens or [""] for tokens in corpus], show_progress=False)
        data, indptr = self.bm25.scores["data"], self.bm25.scores["indptr"]
        # Best score each token reaches in any record: the denominator that puts BM25 on [0, 1].
        self.token_max = np.zeros(len(indptr) - 1, dtype=np.float32)
        nonempty = np.diff(indptr) > 0
        if data.size:
            self.token_max[nonempty] = np.maximum.reduceat(data, indptr[:-1][nonempty])
        positive = self.token_max[self.token_max > 0]
        # An unseen query token (typo, order number) could have matched; count it as a typical token.
        self.unseen_weight = float(np.median(positive)) if positive.size else 1.0

    def scores(self, tokens: list[str]) -> np.ndarray:
        tokens = list(dict.fromkeys(tokens))
        vocab = self.bm25.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        reach = float(self.token_max[ids].sum()) + (len(tokens) - len(ids)) * self.unseen_weight
        if not ids or reach <= 0:
            return np.zeros(self.n, dtype=np.float32)
        return np.clip(self.bm25.get_scores_from_ids(ids) / reach, 0.0, 1.0).astype(np.float32)


def best_first(values: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` largest ``values``, largest first, equal values in record order. The order of ties
    must not depend on numpy's partition algorithm: a KB whose title repeats one of its questions word for word
    scores both records the same, and which of them comes first decides the records an answer's score averages.
    numpy's partition is SIMD code picked by the CPU: on an AVX2-only machine it put such a title after its twin
    where AVX-512 machines put it first, and "how long" lost its warranty answer's score by 0.12."""
    # Every record at least as high as the n-th highest value (a value, whatever order the partition left), then
    # cut in order: a run of ties at the cut keeps its first records.
    picked = np.flatnonzero(values >= np.partition(values, len(values) - n)[len(values) - n]) if n < len(values) \
        else np.arange(len(values))
    return picked[np.lexsort((picked, -values[picked]))][:n]


class AnswerHead:
    """A softmax regression from a message's embedding to the answer (family) it asks for, fitted on the KB's
    records.

    Classes are balanced, so an answer with few paraphrases is not outvoted by one with hundreds only
    because it has fewer.
    """

    def __init__(self, embeddings: np.ndarray, labels: np.ndarray, c: float):
        """``labels`` are class indices 0..n-1, each with at least one record."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=c, max_iter=300, class_weight="balanced")
        with warnings.catch_warnings():  # a few hundred lbfgs steps are enough to rank; full convergence adds nothing
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(embeddings, labels)
        coef, intercept = model.coef_, model.intercept_
        if len(model.classes_) == 2:  # sklearn keeps one row for two classes: its logit is the second's over the first
            coef, intercept = np.vstack([np.zeros_like(coef), coef]), np.concatenate([[0.0], intercept])
        self.weights = np.ascontiguousarray(coef.T, dtype=np.float32)
        self.bias = np.asarray(intercept, dtype=np.float32)

    def probabilities(self, vector: np.ndarray) -> np.ndarray:
        logits = np.einsum("j,jk->k", vector, self.weights) + self.bias
        exp = np.exp(logits - logits.max())
        return exp / exp.sum()


@dataclass
class HybridIndex:
    """Records (one text each, pointing at an answer) with L2-normalised embeddings, searchable."""

    texts: list[str]
    answer_ids: list[str]
    embeddings: np.ndarray
    params: FusionParams = field(default_factory=FusionParams)
    # Which records may add kNN support to their answer's score (example questions); answer texts and
    # titles count only as the best match, so an answer with few paraphrases is not pulled down.
    support: list[bool] | None = None
    # Another index over the same texts (another encoder's space): its word indexes are shared, not rebuilt.
    lexical_of: HybridIndex | None = None
    # Vectors of the KB's out-of-scope examples (messages it does not answer); never returned as hits, only read
    # as evidence: how much closer a message comes to them than to anything the KB answers.
    out_of_scope: np.ndarray | None = None
    # The same for Tandem's starter examples (knowledge.starter_examples), read as evidence of their own: the KB's
    # own examples describe this KB's traffic, the starter set any shop's, and the router weighs them apart.
    starter: np.ndarray | None = None
    # Per record, what the answer head tells apart (default: its answer). An answer and its translations are one
    # family: in a multilingual space their records say the same thing, and splitting them would halve both.
    families: list[str] | None = None

    def __post_init__(self) -> None:
        self.embeddings = np.ascontiguousarray(self.embeddings, dtype=np.float32)
        if self.embeddings.ndim != 2:
            self.embeddings = self.embeddings.reshape(len(self.texts), -1)
        if len(self.texts) != len(self.embeddings) or len(self.texts) != len(self.answer_ids):
            raise ValueError("texts, answer_ids and embeddings must have the same length")
        self._answer_index = {a: i for i, a in enumerate(dict.fromkeys(self.answer_ids))}
        self._answer_names = list(self._answer_index)
        self._record_answer = np.array([self._answer_index[a] for a in self.answer_ids], dtype=np.int64)
        self._support = np.ones(len(self.texts), dtype=bool) if self.support is None else np.asarray(self.support, bool)
        p = self.params
        self._words: _BM25 | None
        self._ngrams: _BM25 | None
        if self.lexical_of is not None:
            self._words, self._ngrams = self.lexical_of._words, self.lexical_of._ngrams
        else:
            self._words = (_BM25([word_tokens(t, p.cjk_segmenter) for t in self.texts], p.bm25_k1, p.bm25_b)
                           if self.texts else None)
            self._ngrams = (_BM25([ngram_tokens(t, p.ngram) for t in self.texts], p.bm25_k1, p.bm25_b)
                            if self.texts and p.ngram and p.ngram_weight > 0 else None)
        self._scale: tuple[float, float] | None = None
        families = self.families if self.families is not None else self.answer_ids
        if len(families) != len(self.texts):
            raise ValueError("families must name one family per record")
        family_index = {f: i for i, f in enumerate(dict.fromkeys(families))}
        record_family = np.array([family_index[f] for f in families], dtype=np.int64)
        self._answer_family = np.zeros(len(self._answer_names), dtype=np.int64)
        self._answer_family[self._record_answer] = record_family  # every record of an answer is in its family
        self._head = (AnswerHead(self.embeddings, record_family, p.head_c)
                      if p.head_weight > 0 and len(family_index) > 1 else None)
        self.out_of_scope = self._examples(self.out_of_scope)
        self.starter = self._examples(self.starter)

    def _examples(self, vectors: np.ndarray | None) -> np.ndarray | None:
        """Out-of-scope example vectors as a float32 matrix of the records' width; None when there are none."""
        if vectors is None or not len(vectors):
            return None
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        if self.embeddings.size and vectors.shape[1] != self.embeddings.shape[1]:
            raise ValueError("out-of-scope vectors must have the width of the records' embeddings")
        return vectors

    def __len__(self) -> int:
        return len(self.texts)

    def lexical_scores(self, query: str) -> np.ndarray:
        """Normalised BM25 of every record: whole words/CJK grams blended with character n-grams."""
        if self._words is None:
            return np.zeros(len(self.texts), dtype=np.float32)
        words = self._words.scores(word_tokens(query, self.params.cjk_segmenter))
        if self._ngrams is None:
            return words
        grams = ngram_tokens(query, self.params.ngram)
        if not grams:  # e.g. a Chinese query: the n-gram index has nothing to say, do not dilute
            return words
        g = self.params.ngram_weight
        return (1.0 - g) * words + g * self._ngrams.scores(grams)

    def search(self, query: str, vector: np.ndarray, k: int = 3, lexical_weight: float | None = None,
               evidence: dict[str, float] | None = None, exclude: int | None = None) -> list[AnswerScore]:
        """Best ``k`` answers; when ``evidence`` is a dict, also the distance evidence of :meth:`evidence_of`.
        ``exclude`` leaves one record out (a stored question searched as if it were a new message)."""
        if not self.texts or k <= 0:
            return []
        p = self.params
        if lexical_weight is None:
            lexical_weight = p.cjk_lexical_weight if has_cjk(query) else p.lexical_weight
        # einsum, not `@`: a matrix-vector product through multi-threaded OpenBLAS is 5x slower on a busy
        # 2-core box (threads fight for the cores); einsum's single-threaded loop does not.
        qvec = np.asarray(vector, dtype=np.float32).reshape(-1)
        raw = np.einsum("ij,j->i", self.embeddings, qvec)
        lexical = self.lexical_scores(query) if lexical_weight > 0 else np.zeros_like(raw)
        if exclude is not None:
            raw[exclude], lexical[exclude] = -1.0, 0.0
        dense = np.clip(raw, 0.0, 1.0)
        results = self.rank(dense, lexical, lexical_weight, k, self._head_probabilities(qvec))
        if evidence is not None:
            own, starter = (np.einsum("ij,j->i", examples, qvec) if examples is not None else np.zeros(0, np.float32)
                            for examples in (self.out_of_scope, self.starter))
            evidence.update(self.evidence_of(raw, lexical, own, starter))
        return results

    def _head_probabilities(self, qvec: np.ndarray) -> np.ndarray | None:
        """Per answer (in ``_answer_names`` order), the head's probability of its family; None without a head."""
        return self._head.probabilities(qvec)[self._answer_family] if self._head is not None else None

    def answer_probabilities(self, vector: np.ndarray) -> dict[str, float]:
        """The answer head's probability of each answer's family for a message vector (empty without a head)."""
        probabilities = self._head_probabilities(np.asarray(vector, dtype=np.float32).reshape(-1))
        return {} if probabilities is None else dict(zip(self._answer_names, probabilities.tolist()))

    def evidence_of(self, raw: np.ndarray, lexical: np.ndarray, outside: np.ndarray | None = None,
                    starter: np.ndarray | None = None, neighbours: int = 10) -> dict[str, float]:
        """How close the message comes to what the KB knows, in terms that mean the same for any KB and encoder.

        ``dense_top`` is the best cosine to any stored text and ``dense_z`` the same put on this KB's own scale
        (how far above or below the typical nearest-paraphrase similarity of the KB's questions, in spreads):
        an out-of-scope message is far from every question, whatever the encoder's cosine range. The
        neighbours' agreement is the share of the nearest ``neighbours`` records that point at the answer of
        the nearest one (kNN voting); the dense margin is the gap to the best record of any other answer.

        ``outside`` holds the message's cosines to the KB's out-of-scope examples. When there are any,
        ``oos_gap`` is how much closer the nearest of them comes than the nearest answerable record, and
        ``oos_knn`` the share of them among the nearest ``neighbours`` of both kinds; ``has_oos`` says whether
        the KB has such examples at all (without them both read 0, and the router knows not to expect them).
        ``starter`` holds the cosines to Tandem's starter examples: ``has_starter``, ``starter_gap`` and
        ``starter_knn`` mean the same for them.
        """
        top = best_first(raw, min(neighbours, len(raw)))
        best = int(top[0])
        best_answer = self._record_answer[best]
        others = raw[self._record_answer != best_answer]
        median, spread = self.scale()
        dense_top = float(raw[best])
        return {"dense_top": dense_top, "dense_z": (dense_top - median) / spread,
                "dense_mean": float(raw[top[:5]].mean()),
                "dense_margin": dense_top - (float(others.max()) if others.size else 0.0),
                "agreement": float(np.mean(self._record_answer[top] == best_answer)),
                "lexical_top": float(lexical.max()) if lexical.size else 0.0,
                **self._outside_evidence(raw[top], outside, neighbours, "oos"),
                **self._outside_evidence(raw[top], starter, neighbours, "starter")}

    @staticmethod
    def _outside_evidence(nearest: np.ndarray, outside: np.ndarray | None, neighbours: int,
                          name: str) -> dict[str, float]:
        """``has_<name>``, ``<name>_gap`` and ``<name>_knn`` (see :meth:`evidence_of`) from the nearest answerable
        records' cosines (best first) and the cosines to one set of out-of-scope examples."""
        if outside is None or not outside.size:
            return {f"has_{name}": 0.0, f"{name}_gap": 0.0, f"{name}_knn": 0.0}
        n = min(neighbours, outside.size)
        closest_outside = -np.sort(np.partition(-outside, n - 1)[:n])  # the n largest cosines, best first
        merged = np.concatenate([nearest, closest_outside])
        order = np.argsort(-merged, kind="stable")[:neighbours]
        return {f"has_{name}": 1.0, f"{name}_gap": float(closest_outside[0] - nearest[0]),
                f"{name}_knn": float(np.mean(order >= len(nearest)))}

    def scale(self, sample: int = 1500, seed: int = 13) -> tuple[float, float]:
        """(median, spread) of the KB's own nearest-paraphrase cosine: each sampled example question against every
        other record. Computed once per index; the spread is the interquartile range (robust), at least 0.01."""
        if self._scale is None:
            support = np.flatnonzero(self._support)
            if support.size < 2:
                self._scale = (0.6, 0.1)
            else:
                rng = np.random.default_rng(seed)
                picks = rng.choice(support, size=min(sample, support.size), replace=False)
                sims = self.embeddings[picks] @ self.embeddings.T
                sims[np.arange(len(picks)), picks] = -1.0
                nearest = sims.max(axis=1)
                q1, median, q3 = np.percentile(nearest, [25, 50, 75])
                self._scale = (float(median), max(0.01, float(q3 - q1)))
        return self._scale

    def rank(self, dense: np.ndarray, lexical: np.ndarray, lexical_weight: float, k: int,
             head: np.ndarray | None = None) -> list[AnswerScore]:
        """Fuse per-record dense and lexical scores, aggregate them per answer and blend in the answer head's
        probabilities ``head`` when given (see module doc)."""
        p = self.params
        combined = (1.0 - lexical_weight) * dense + lexical_weight * lexical
        n_cand = min(len(combined), max(p.candidates, k * p.top_m))
        cand = best_first(combined, n_cand)
        # Records are now in descending score order, so each answer's list is its best-first list.
        per_answer: dict[int, list[int]] = {}
        for r in cand.tolist():
            per_answer.setdefault(int(self._record_answer[r]), []).append(r)
        weights = p.decay ** np.arange(p.top_m) if p.decay > 0 else np.array([1.0])
        # The head reads the embedding too: where the encoder is blind to the message's script (Chinese in MiniLM's
        # space, lexical weight raised above the default), it shrinks in step with the dense part.
        head_weight = p.head_weight * min(1.0, (1.0 - lexical_weight) / max(1e-6, 1.0 - p.lexical_weight))
        results = []
        for answer, records in per_answer.items():
            best = records[0]
            chosen = [best] + [r for r in records[1:] if self._support[r]][:len(weights) - 1]
            top = combined[chosen]
            w = weights[:len(top)]
            score = float((top * w).sum() / w.sum())
            if head is not None:
                score = (score + head_weight * float(head[answer])) / (1.0 + head_weight)
            results.append(AnswerScore(self._answer_names[answer], score, best,
                                       float(dense[best]), float(lexical[best])))
        results.sort(key=lambda s: -s.score)
        return results[:k]
