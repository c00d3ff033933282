"""The small tier: the knowledge base's draft with its citations, and a notice when it was the fallback choice."""

from __future__ import annotations

from collections.abc import Iterator

from chains import answers
from chains.schema import Revised
from chains.tiers.base import SMALL_ROUTE, Tier, register
from chains.turn import Turn


@register
class SmallTier(Tier):
    name = SMALL_ROUTE
    cacheable = True
    plans = (SMALL_ROUTE,)

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        draft = turn.draft or answers.draft_answer(turn.text, turn.hits, self.parts.brand)
        turn.sources = draft.sources
        text = draft.text
        if turn.no_fit:
            text = f"{answers.notices_for(self.parts.brand)[turn.language].no_fit}\n\n{text}"
        if turn.degraded:
            text = f"{text}\n\n{answers.notices_for(self.parts.brand)[turn.language].degraded}"
        turn.note("tier", "small", sources=[s["answer_id"] for s in draft.sources])
        turn.finish("small", text, "tier: small (knowledge-base draft)")
        yield text
        yield turn
