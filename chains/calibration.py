"""Draft quality that means the same on every knowledge base: the rewrite threshold, floored per KB.

The router's draft quality is a probability fitted on one KB's development messages (Bitext). On another KB the
same evidence reads differently: on a small FAQ with three questions an answer, right drafts scored 0.02-0.43
and the fitted rewrite threshold (0.6375) sent nearly all of them to the LLM. So each KB's own stored questions
are searched as if they were new messages, each without its own record (leave one out), and the KB's *floor* is
the draft quality under which only ``RIGHT_DRAFTS_REWRITTEN`` of those right drafts fall. A turn rewrites a draft
only below the lower of the operator's threshold and its KB's floor: a draft that looks like this KB's right
drafts is served as it is, on any KB. The floor is per language of the message (English and Chinese drafts read
differently, whether or not the KB has a vector space of their own) and is computed once per KB version and
router.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from chains import answers
from chains.routers.base import RouteContext, Router
from core.text import language_of
from knowledge.base import KnowledgeBase

# Stored questions left out are easier than what customers type: on the demo shop's development messages a floor
# under which 2 % of the left-out right drafts fall rewrote 4.1 % of the right drafts (1 %: 3.1 %, 0.5 %: 2.0 %).
RIGHT_DRAFTS_REWRITTEN = 0.005
MIN_RIGHT_DRAFTS = 20  # fewer right left-out searches than this say too little: the operator's threshold alone
LEFT_OUT_PER_SPACE = 300


@dataclass(frozen=True)
class QualityFloor:
    value: float        # rewrite only below this draft quality (the operator's threshold still caps it)
    right_drafts: int   # left-out stored questions whose top answer was right, the sample it was read from
    searched: int


def quality_floors(kb: KnowledgeBase, router: Router) -> dict[str, QualityFloor]:
    """Per language ("en", "zh"), the draft quality under which RIGHT_DRAFTS_REWRITTEN of the KB's right
    left-out drafts fall; empty when the router learned no draft quality or the KB cannot leave records out."""
    qualities: dict[str, list[float]] = {}
    searched: dict[str, int] = {}
    for question, answer_id, hits, evidence in kb.left_out_searches(LEFT_OUT_PER_SPACE):
        language = language_of(question)
        searched[language] = searched.get(language, 0) + 1
        if not hits or hits[0].answer_id != answer_id:
            continue
        quality = router.draft_quality(RouteContext(hits=hits, evidence=evidence),
                                       answers.draft_answer(question, hits).coverage)
        if quality is None:
            return {}
        qualities.setdefault(language, []).append(quality)
    return {language: QualityFloor(round(float(np.quantile(values, RIGHT_DRAFTS_REWRITTEN)), 4), len(values),
                                   searched[language])
            for language, values in qualities.items() if len(values) >= MIN_RIGHT_DRAFTS}
