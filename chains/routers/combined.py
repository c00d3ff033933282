"""`combined` (the default): stacks the learned logit with the knowledge base's top score and margin.

The stacker is itself a logistic regression fitted on validation queries against a real knowledge base,
so its output is the calibrated probability that the LLM is needed *for this knowledge base's coverage*.
"""

from __future__ import annotations

from chains.features import message_features
from chains.routers.base import RouteContext, Router, register, sigmoid
from chains.routers.learned import LearnedRouter
from chains.routers.similarity import SimilarityRouter


# The learned model has never seen most of what customers may ask; far from its training data its logit
# can be confidently wrong. Clipping it keeps it a vote, not a veto, over the knowledge base's evidence.
LEARNED_LOGIT_CLIP = 3.0


STACK_INPUTS = ("learned_logit", "kb_top", "kb_margin", "log_chars", "n_clauses")


def stack_inputs(learned_logit: float, kb_top: float, kb_margin: float, query: str) -> list[float]:
    """Length and clause count enter the stacker directly: a long, multi-part request needs the LLM
    whatever its topic, and the clipped learned logit alone cannot say so strongly enough."""
    clipped = max(-LEARNED_LOGIT_CLIP, min(LEARNED_LOGIT_CLIP, learned_logit))
    features = message_features(query)
    return [clipped, kb_top, kb_margin, features["log_chars"], features["n_clauses"]]


@register
class CombinedRouter(Router):
    name = "combined"

    def __init__(self, params):
        super().__init__(params)
        self.learned = LearnedRouter(params)
        self.similarity = SimilarityRouter(params)

    def score(self, query: str, context: RouteContext) -> float:
        params = self.params.get("combined")
        if not params:  # untrained: average the two calibrated views
            return 0.5 * (self.learned.score(query, context) + self.similarity.score(query, context))
        inputs = stack_inputs(self.learned.raw_logit(query, context), context.kb_top, context.kb_margin, query)
        return sigmoid(params["intercept"] + sum(w * x for w, x in zip(params["coef"], inputs)))
