"""`evidence` (the default): how close the message comes to what this knowledge base knows, and what kind of
request it is. Two models fitted on validation data against real knowledge bases:

* ``p_llm``: the probability that the LLM is needed, from gradient-boosted trees (:class:`TreeModel`). Its inputs
  mean the same for any knowledge base and any encoder: the KB's own scores (top, margin), distance evidence
  (nearest cosine, the same on the KB's own scale, kNN agreement, the gap to the nearest other answer, word
  overlap, and, where the KB has out-of-scope examples, how much closer the message comes to them than to any
  answer; the same for Tandem's starter examples, weighed on their own) and the message's features (length,
  clauses, comparisons, complaints, how many things it asks for ...). The trees are held to what the evidence
  means (closer to the KB never raises p_llm; closer to out-of-scope examples never lowers it), and there is no
  per-topic weight on the embedding itself, so a router fitted on public data carries over to a shop's own FAQ
  and to a KB-tuned encoder.
* ``draft_quality``: the calibrated probability that the top answer is the right one (a logistic regression,
  :class:`LinearModel`); below the rewrite threshold the LLM rewrites the draft. Fitted on in-scope validation
  messages, so a right draft is rarely rewritten.

An artifact names the inputs each model was fitted on, so one trained by an older release (a logistic ``p_llm``,
fewer features) still loads and scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chains.features import FEATURE_NAMES, feature_vector
from chains.routers.base import RouteContext, Router, register, sigmoid

EVIDENCE_NAMES = ("kb_top", "kb_margin", "dense_top", "dense_z", "dense_mean", "dense_margin", "agreement",
                  "lexical_top", "has_oos", "oos_gap", "oos_knn", "has_starter", "starter_gap", "starter_knn")
ROUTE_NAMES = (*EVIDENCE_NAMES, *FEATURE_NAMES)
DRAFT_NAMES = (*EVIDENCE_NAMES, "coverage")


def evidence_inputs(context: RouteContext) -> list[float]:
    values = {"kb_top": context.kb_top, "kb_margin": context.kb_margin, **context.evidence}
    return [float(values.get(name, 0.0)) for name in EVIDENCE_NAMES]


def router_inputs(query: str, context: RouteContext) -> np.ndarray:
    return np.asarray(evidence_inputs(context) + feature_vector(query, bool(context.history)), dtype=np.float64)


def draft_inputs(context: RouteContext, coverage: float) -> np.ndarray:
    return np.asarray(evidence_inputs(context) + [coverage], dtype=np.float64)


def _columns(names: list[str], width: int, available: tuple[str, ...]) -> np.ndarray:
    """Where a model's inputs sit among the columns this code computes. ``names`` are the columns it was fitted
    on, so a router trained before a feature was added keeps reading its own, and a promoted artifact survives
    an upgrade."""
    names = names or list(available[:width])
    unknown = [name for name in names if name not in available]
    if unknown or len(names) != width:
        raise ValueError(f"router artifact inputs {unknown or names} do not match this version's "
                         f"{list(available)}: retrain it with `tandem router train`")
    return np.asarray([available.index(name) for name in names], dtype=np.int64)


class LinearModel:
    """A standardised logistic regression read from the artifact (``mean``, ``scale``, ``coef``, ``intercept``)."""

    def __init__(self, params: dict[str, Any], available: tuple[str, ...]):
        self.mean = np.asarray(params["mean"], dtype=np.float64)
        self.scale = np.asarray(params["scale"], dtype=np.float64)
        self.coef = np.asarray(params["coef"], dtype=np.float64)
        self.intercept = float(params["intercept"])
        self.columns = _columns(params.get("inputs") or [], len(self.coef), available)

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Rows of inputs (all of ``available``) to log-odds."""
        return ((x[:, self.columns] - self.mean) / self.scale) @ self.coef + self.intercept

    def probability(self, x: np.ndarray) -> float:
        return sigmoid(float(self.logits(x[None, :])[0]))


class TreeModel:
    """Gradient-boosted trees read from the artifact: ``intercept`` (the log-odds every tree adds to) and
    ``trees``, each as flat node arrays (``feature``, ``threshold``, ``left``, ``right``, ``leaf``, ``value``,
    ``missing_left``); a row goes left where its input is at most the threshold. All trees step down together, one
    numpy step per level, so the 200 trees of the shipped router take about 0.2 ms a message."""

    def __init__(self, params: dict[str, Any], available: tuple[str, ...]):
        trees = params["trees"]
        self.intercept = float(params["intercept"])
        self.columns = _columns(params.get("inputs") or [], int(params["width"]), available)
        size = max(len(t["value"]) for t in trees)

        def padded(key: str, dtype: type) -> np.ndarray:
            out: np.ndarray = np.zeros((len(trees), size), dtype=dtype)
            for i, tree in enumerate(trees):
                out[i, :len(tree[key])] = tree[key]
            return out

        self.feature, self.threshold = padded("feature", np.int64), padded("threshold", np.float64)
        self.left, self.right = padded("left", np.int64), padded("right", np.int64)
        self.leaf, self.value = padded("leaf", bool), padded("value", np.float64)
        self.missing_left = padded("missing_left", bool)
        self.depth = int(params["depth"])
        self._trees = np.arange(len(trees))

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Rows of inputs (all of ``available``) to log-odds."""
        rows = x[:, self.columns]
        out = np.empty(len(rows))
        for r, row in enumerate(rows):
            node = np.zeros(len(self._trees), dtype=np.int64)
            for _ in range(self.depth):
                at = (self._trees, node)
                if self.leaf[at].all():
                    break
                value = row[self.feature[at]]
                left = np.where(np.isnan(value), self.missing_left[at], value <= self.threshold[at])
                node = np.where(self.leaf[at], node, np.where(left, self.left[at], self.right[at]))
            out[r] = self.intercept + self.value[self._trees, node].sum()
        return out

    def probability(self, x: np.ndarray) -> float:
        return sigmoid(float(self.logits(x[None, :])[0]))


def load_model(params: dict[str, Any], available: tuple[str, ...]) -> LinearModel | TreeModel:
    """The model an artifact block describes: trees when it has them, else a logistic regression."""
    return TreeModel(params, available) if "trees" in params else LinearModel(params, available)


@register
class EvidenceRouter(Router):
    name = "evidence"

    def __init__(self, params: dict[str, Any]):
        super().__init__(params)
        block = params.get("evidence") or {}
        self._route = load_model(block["route"], ROUTE_NAMES) if "route" in block else None
        self._draft = load_model(block["draft"], DRAFT_NAMES) if "draft" in block else None

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


__all__ = ["EvidenceRouter", "EVIDENCE_NAMES", "DRAFT_NAMES", "FEATURE_NAMES", "ROUTE_NAMES", "router_inputs",
           "draft_inputs", "load_model"]
