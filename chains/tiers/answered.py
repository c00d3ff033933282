"""Turns settled before the routing stages (the guard refused, the cache hit): say the answer at once."""

from __future__ import annotations

from collections.abc import Iterator

from chains.schema import Revised
from chains.tiers.base import Tier, register
from chains.turn import Turn


@register
class AnsweredTier(Tier):
    name = "answered"

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        if turn.answer:
            yield turn.answer
        yield turn
