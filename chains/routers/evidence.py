"""`evidence` (the default): how close the message comes to what this knowledge base knows, and what kind of
request it is. Two logistic models fitted on validation data against real knowledge bases:

* ``p_llm``: the calibrated probability that the LLM is needed. Its inputs mean the same for any knowledge base
  and any encoder: the KB's own scores (top, margin), distance evidence (nearest cosine, the same on the KB's
  own scale, kNN agreement, the gap to the nearest other answer, word overlap, and, where the KB has
  out-of-scope examples, how much closer the message comes to them than to any answer; the same for Tandem's
  starter examples, weighed on their own) and the message's features
  (length, clauses, comparisons, complaints ...). There is no per-topic weight on the embedding itself, so a
  router fitted on public data carries over to a shop's own FAQ and to a KB-tuned encoder.
* ``draft_quality``: the calibrated probability that the top answer is the right one; below the rewrite
  threshold the LLM rewrites the draft. Fitted on in-scope validation messages, so a right draft is rarely
  rewritten.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chains.features import FEATURE_NAMES, feature_vector
from chains.routers.base import RouteContext, Router, register, sigmoid

EVIDENCE_NAMES = ("kb_top", "kb_margin", "dense_top", "dense_z", "dense_mean", "dense_margin", "agreement",
                  "lexical_top", "has_oos", "oos_gap", "oos_knn", "has_starter", "starter_gap", "starter_knn")
DRAFT_NAMES = (*EVIDENCE_NAMES, "coverage")


def evidence_inputs(context: RouteContext) -> list[float]:
    values = {"kb_top": context.kb_top, "kb_margin": context.kb_margin, **context.evidence}
    return [float(values.get(name, 0.0)) for name in EVIDENCE_NAMES]


def router_inputs(query: str, context: RouteContext) -> np.ndarray:
    return np.asarray(evidence_inputs(context) + feature_vector(query, bool(context.history)), dtype=np.float64)


def draft_inputs(context: RouteContext, coverage: float) -> np.ndarray:
    return np.asarray(evidence_inputs(context) + [coverage], dtype=np.float64)


class LinearModel:
    """A standardised logistic regression read from the artifact (``mean``, ``scale``, ``coef``, ``intercept``).

    ``inputs`` names the columns it was fitted on; ``available`` names the columns this code computes. A router
    trained before a feature was added keeps reading its own columns, so a promoted artifact survives an upgrade.
    """

    def __init__(self, params: dict[str, Any], available: tuple[str, ...]):
        self.mean = np.asarray(params["mean"], dtype=np.float64)
        self.scale = np.asarray(params["scale"], dtype=np.float64)
        self.coef = np.asarray(params["coef"], dtype=np.float64)
        self.intercept = float(params["intercept"])
        names = params.get("inputs") or available[:len(self.coef)]
        unknown = [name for name in names if name not in available]
        if unknown or len(names) != len(self.coef):
            raise ValueError(f"router artifact inputs {unknown or names} do not match this version's "
                             f"{list(available)}: retrain it with `tandem router train`")
        self.columns = np.asarray([available.index(name) for name in names], dtype=np.int64)

    def probability(self, x: np.ndarray) -> float:
        return sigmoid(float(((x[self.columns] - self.mean) / self.scale) @ self.coef) + self.intercept)


@register
class EvidenceRouter(Router):
    name = "evidence"

    def __init__(self, params: dict[str, Any]):
        super().__init__(params)
        block = params.get("evidence") or {}
        self._route = LinearModel(block["route"], (*EVIDENCE_NAMES, *FEATURE_NAMES)) if "route" in block else None
        self._draft = LinearModel(block["draft"], DRAFT_NAMES) if "draft" in block else None

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
