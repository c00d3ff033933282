"""`combined` (the default): stacks the learned logit with the knowledge base's top score and margin.

The stacker is itself a logistic regression fitted on validation queries against a real knowledge base,
so its output is the calibrated probability that the LLM is needed *for this knowledge base's coverage*.
"""

from __future__ import annotations

from chains.routers.base import RouteContext, Router, register, sigmoid
from chains.routers.learned import LearnedRouter
from chains.routers.similarity import SimilarityRouter

# The learned model has never seen most of what customers may ask; far from its training data its logit
# can be confidently wrong. Clipping it keeps it a vote, not a veto, over the knowledge base's evidence.
LEARNED_LOGIT_CLIP = 3.0


def stack_inputs(learned_logit: float, context: RouteContext) -> list[float]:
    clipped = max(-LEARNED_LOGIT_CLIP, min(LEARNED_LOGIT_CLIP, learned_logit))
    return [clipped, context.kb_top, context.kb_margin]


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
        inputs = stack_inputs(self.learned.raw_logit(query, context), context)
        return sigmoid(params["intercept"] + sum(w * x for w, x in zip(params["coef"], inputs)))
