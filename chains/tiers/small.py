"""The small tier: the knowledge base's draft with its citations, and a notice when it was the fallback choice.

It also takes over a turn whose customer clicked a suggested reply (``ChatRequest.suggestion``: a predicted
follow-up, chains/followups.py): that KB answer is served at once, whatever the threshold stage planned, and the
trace notes the click (stage ``suggest``) for the console's click-through.
"""

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

    def claims(self, turn: Turn) -> tuple[str, str] | None:
        """A clicked suggested reply: its KB answer, at once; an unknown id is routed as the typed message."""
        answer_id = turn.request.suggestion
        if not answer_id:
            return None
        hit = self.parts.kb.answer_hit(answer_id) if self.parts.kb is not None else None
        if hit is None:
            turn.note("suggest", "unknown suggestion ignored", choice=answer_id)
            return None
        turn.hits = [hit]
        turn.draft = answers.draft_answer(turn.text, turn.hits, self.parts.brand)
        turn.note("suggest", "clicked", choice=answer_id)
        return SMALL_ROUTE, f"suggested reply '{answer_id}' clicked: the small tier answers it"

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        draft = turn.draft or answers.draft_answer(turn.text, turn.hits, self.parts.brand)
        turn.sources = draft.sources
        text = draft.text
        if turn.no_fit:
            text = f"{answers.notices_for(self.parts.brand)[turn.language].no_fit}\n\n{text}"
        if turn.degraded:
            text = f"{text}\n\n{answers.notices_for(self.parts.brand)[turn.language].degraded}"
        turn.note("tier", SMALL_ROUTE, sources=[s["answer_id"] for s in draft.sources])
        turn.finish(SMALL_ROUTE, text, "tier: small (knowledge-base draft)")
        yield text
        yield turn
