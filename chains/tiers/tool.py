"""The tool tier: a rule named a tool (the order status), and the tool's answer is the reply."""

from __future__ import annotations

from collections.abc import Iterator

from chains.rules import TOOLS
from chains.schema import Revised
from chains.tiers.base import TOOL_ROUTE, Tier, register
from chains.turn import Turn, timed


@register
class ToolTier(Tier):
    name = TOOL_ROUTE
    plans = (TOOL_ROUTE,)
    ruled_only = True  # a tool's answer is personal (an order): never cached, and never the KB's business

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        rule = turn.rule
        if self.parts.db is None:  # batch routing and replay: the decision without the side effect
            turn.finish(TOOL_ROUTE, "", f"rule: {rule.name} -> tool {rule.tool} (not run)")
            yield turn
            return
        with timed(turn, "tool"):
            # The signed customer only: an unsigned user_id is a label anyone can type.
            result = TOOLS[rule.tool](turn.text, turn.request.customer, self.parts.db)
        turn.note("tool", rule.tool, **result.detail)
        turn.finish(TOOL_ROUTE, result.answer, f"rule: {rule.name} -> tool {rule.tool}")
        yield result.answer
        yield turn
