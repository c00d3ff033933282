"""The handoff tier: a rule sends the message straight to a person (the console's handoff queue), no answer drafted.

An operator adds a rule with ``route: handoff`` (chains/rules.yaml has an example); the customer reads, in their
language, that a colleague will reply in the same conversation.
"""

from __future__ import annotations

from collections.abc import Iterator

from chains import answers
from chains.schema import Revised
from chains.tiers.base import HANDOFF_ROUTE, Tier, register
from chains.turn import Turn


@register
class HandoffTier(Tier):
    name = HANDOFF_ROUTE
    plans = (HANDOFF_ROUTE,)
    ruled_only = True

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        text = answers.notices_for(self.parts.brand)[turn.language].handoff
        turn.handoff = True  # the service queues the conversation for a person (chains/service.py)
        turn.served = HANDOFF_ROUTE
        turn.note("tier", HANDOFF_ROUTE, rule=turn.rule.name if turn.rule else "")
        turn.finish(HANDOFF_ROUTE, text, "tier: handoff (a person replies)")
        yield text
        yield turn
