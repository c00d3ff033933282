"""`evidence` (the default): how close the message comes to what this knowledge base knows, and what kind of
request it is. Two models fitted on validation data against real knowledge bases:

* ``p_llm``: the probability that the LLM is needed. Its inputs mean the same for any knowledge base
  and any encoder: the KB's own scores (top, margin), distance evidence (nearest cosine, the same on the KB's
  own scale, kNN agreement, the gap to the nearest other answer, word overlap, and, where the KB has
  out-of-scope examples, how much closer the message comes to them than to any answer) and the message's features
  (length, clauses, comparisons, complaints ...). There is no per-topic weight on the embedding itself, so a
  router fitted on public data carries over to a shop's own FAQ and to a KB-tuned encoder. A small ensemble of
  boosted trees: whether a long message is far from the KB because it is chatty or because it asks for
  judgement depends on the other inputs, which one linear score could not express.
* ``draft_quality``: the calibrated probability that the top answer is the right one (a logistic model); below
  the rewrite threshold the LLM rewrites the draft. Fitted on in-scope validation messages, so a right draft is
  rarely rewritten.

Both read their parameters from the artifact; ``kind`` says which model a block holds (``linear`` by default).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chains.features import FEATURE_NAMES, feature_vector
from chains.routers.base import RouteContext, Router, register, sigmoid

EVIDENCE_NAMES = ("kb_top", "kb_margin", "dense_top", "dense_z", "dense_mean", "dense_margin", "agreement",
                  "lexical_top", "has_oos", "oos_gap", "oos_knn")
DRAFT_NAMES = (*EVIDENCE_NAMES, "coverage")


def evidence_inputs(context: RouteContext) -> list[float]:
    values = {"kb_top": context.kb_top, "kb_margin": context.kb_margin, **context.evidence}
    return [float(values.get(name, 0.0)) for name in EVIDENCE_NAMES]


def router_inputs(query: str, context: RouteContext) -> np.ndarray:
    return np.asarray(evidence_inputs(context) + feature_vector(query, bool(context.history)), dtype=np.float64)


def draft_inputs(context: RouteContext, coverage: float) -> np.ndarray:
    return np.asarray(evidence_inputs(context) + [coverage], dtype=np.float64)


class LinearModel:
    """A standardised logistic regression read from the artifact (``mean``, ``scale``, ``coef``, ``intercept``)."""

    def __init__(self, params: dict[str, Any]):
        self.mean = np.asarray(params["mean"], dtype=np.float64)
        self.scale = np.asarray(params["scale"], dtype=np.float64)
        self.coef = np.asarray(params["coef"], dtype=np.float64)
        self.intercept = float(params["intercept"])
        if not len(self.mean) == len(self.scale) == len(self.coef):
            raise ValueError("mean, scale and coef differ in length")

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        z = ((np.atleast_2d(x) - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def probability(self, x: np.ndarray) -> float:
        return sigmoid(float(((x - self.mean) / self.scale) @ self.coef) + self.intercept)


class BoostedTrees:
    """Gradient-boosted regression trees on the log-odds, read from the artifact: ``intercept`` plus, per tree,
    parallel node lists ``feature`` (-1 at a leaf), ``threshold``, ``left``, ``right``, ``value`` and
    ``missing_left``. A node sends x to ``left`` when x[feature] <= threshold (a missing value goes where
    ``missing_left`` says), as scikit-learn's HistGradientBoosting does, so the scores are the fitted model's.

    All trees are padded into one array and walked together, one level per step: a message costs about
    depth x a few numpy operations (~0.1 ms for 200 trees), not one Python loop per node."""

    def __init__(self, params: dict[str, Any]):
        trees = params["trees"]
        if not trees:
            raise ValueError("no trees")
        self.intercept = float(params["intercept"])
        width = max(len(tree["feature"]) for tree in trees)
        self.feature = np.full((len(trees), width), -1, dtype=np.int64)
        self.threshold = np.zeros((len(trees), width))
        self.value = np.zeros((len(trees), width))
        self.missing_left = np.zeros((len(trees), width), dtype=bool)
        # A leaf's children are itself, so walking past a leaf stays there.
        self.left = np.tile(np.arange(width), (len(trees), 1))
        self.right = self.left.copy()
        for t, tree in enumerate(trees):
            n = len(tree["feature"])
            columns = [tree[key] for key in ("feature", "threshold", "left", "right", "value", "missing_left")]
            if any(len(column) != n for column in columns):
                raise ValueError(f"tree {t}: node lists differ in length")
            self.feature[t, :n] = tree["feature"]
            self.threshold[t, :n] = tree["threshold"]
            self.value[t, :n] = tree["value"]
            self.missing_left[t, :n] = tree["missing_left"]
            split = np.asarray(tree["feature"]) >= 0
            self.left[t, :n] = np.where(split, tree["left"], np.arange(n))
            self.right[t, :n] = np.where(split, tree["right"], np.arange(n))
        self.n_inputs = int(params["n_inputs"])
        if self.feature.max() >= self.n_inputs:
            raise ValueError("a tree reads an input the model does not have")
        self.depth = int(params["depth"])
        self._rows = np.arange(len(trees))

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if x.shape[1] != self.n_inputs:
            raise ValueError(f"expected {self.n_inputs} inputs, got {x.shape[1]}")
        node = np.zeros((len(x), len(self._rows)), dtype=np.int64)
        for _ in range(self.depth):
            feature = self.feature[self._rows, node]
            values = np.take_along_axis(x, np.maximum(feature, 0), axis=1)
            go_left = np.where(np.isnan(values), self.missing_left[self._rows, node],
                               values <= self.threshold[self._rows, node])
            node = np.where(go_left, self.left[self._rows, node], self.right[self._rows, node])
        z = self.value[self._rows, node].sum(axis=1) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def probability(self, x: np.ndarray) -> float:
        return float(self.probabilities(x)[0])


MODEL_KINDS: dict[str, type[LinearModel] | type[BoostedTrees]] = {"linear": LinearModel,
                                                                    "boosted_trees": BoostedTrees}


def model_from(params: dict[str, Any]) -> LinearModel | BoostedTrees:
    """The model an artifact block describes (``kind``: linear, the default, or boosted_trees)."""
    kind = params.get("kind", "linear")
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r} (known: {', '.join(MODEL_KINDS)})")
    return MODEL_KINDS[kind](params)


@register
class EvidenceRouter(Router):
    name = "evidence"

    def __init__(self, params: dict[str, Any]):
        super().__init__(params)
        block = params.get("evidence") or {}
        self._route = model_from(block["route"]) if "route" in block else None
        self._draft = model_from(block["draft"]) if "draft" in block else None

    def score(self, query: str, context: RouteContext) -> float:
        if self._route is None or not context.hits:  # untrained, or nothing in the KB: the LLM decides
            return 1.0 if not context.hits else 0.5
        return self._route.probability(router_inputs(query, context))

    def draft_quality(self, context: RouteContext, coverage: float) -> float | None:
        if self._draft is None:
            return None
        if not context.hits:
            return 0.0
        return self._draft.probability(draft_inputs(context, coverage))


__all__ = ["EvidenceRouter", "EVIDENCE_NAMES", "DRAFT_NAMES", "FEATURE_NAMES", "router_inputs", "draft_inputs"]
