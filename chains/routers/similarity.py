"""`similarity`: the knowledge base's own confidence. A strong, unambiguous top hit stays small."""

from __future__ import annotations

from chains.routers.base import RouteContext, Router, register, sigmoid

# Used until `tandem router train` has fitted them: p_llm = 0.5 at a top score of 0.62.
DEFAULT = {"coef": [-12.0, -4.0], "intercept": 7.5}


@register
class SimilarityRouter(Router):
    name = "similarity"

    def logit(self, context: RouteContext) -> float:
        params = self.params.get("similarity", DEFAULT)
        w_top, w_margin = params["coef"]
        return params["intercept"] + w_top * context.kb_top + w_margin * context.kb_margin

    def score(self, query: str, context: RouteContext) -> float:
        return sigmoid(self.logit(context))
