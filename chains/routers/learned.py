"""`learned`: logistic regression on the MiniLM embedding plus interpretable features, Platt-calibrated.

The artifact is a few kilobytes of JSON (chains/artifacts/router.json), readable and diffable.
"""

from __future__ import annotations

import numpy as np

from chains.features import FEATURE_NAMES, feature_vector
from chains.routers.base import RouteContext, Router, register, sigmoid


def learned_inputs(vector: np.ndarray, text: str, has_history: bool) -> np.ndarray:
    return np.concatenate([np.asarray(vector, dtype=np.float32),
                           np.asarray(feature_vector(text, has_history), dtype=np.float32)])


@register
class LearnedRouter(Router):
    name = "learned"

    def __init__(self, params):
        super().__init__(params)
        model = params.get("learned")
        self._model = None
        if model:
            self._model = {key: np.asarray(model[key], dtype=np.float32) for key in ("mean", "scale", "coef")}
            self._model["intercept"] = float(model["intercept"])
            self._platt = model.get("platt", [1.0, 0.0])

    def raw_logit(self, query: str, context: RouteContext) -> float:
        if self._model is None or context.vector is None:
            return 0.0
        x = learned_inputs(context.vector, query, bool(context.history))
        z = (x - self._model["mean"]) / self._model["scale"]
        return float(z @ self._model["coef"] + self._model["intercept"])

    def score(self, query: str, context: RouteContext) -> float:
        a, b = self._platt if self._model is not None else (1.0, 0.0)
        return sigmoid(a * self.raw_logit(query, context) + b)


__all__ = ["LearnedRouter", "learned_inputs", "FEATURE_NAMES"]
