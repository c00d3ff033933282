"""Predicted LLM-bound follow-ups (issue 42, part 3): which recurring LLM-bound question the conversations going on
now are likely to ask next, so the idle-time worker (ops/prepared.py) prepares that one first.

The follow-up model of the suggested replies (chains/followups.py) predicts KB answers; an LLM-bound question has no
KB answer, so here the targets are the recurring groups (ops/recurring.py). From the request log of the groups'
window: for each group, the state (chains.followups.state_of) of the message that came just before each member in its
session, counted; and how many follow-ups each state had in all. A conversation active in the last
:data:`ACTIVE` minutes whose latest state is X makes group g that much more likely next:

    count(X -> a member of g) / count(X -> any message)

summed over the active conversations. Groups scoring at least :data:`MIN_SCORE` go first, highest first; the rest
keep their order (largest first). Pure functions over the database; the worker calls them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from chains.followups import logged_sessions
from chains.schema import PREPARE_CHANNEL
from ops.recurring import RecurringGroup
from storage.db import Database

ACTIVE = timedelta(minutes=15)  # a conversation with a message this recent may still ask its next question
MIN_SCORE = 0.1                 # a group predicted less likely than this keeps its place by size


@dataclass
class FollowupIndex:
    """``before[i]``: the states that preceded group i's members; ``totals``: follow-ups of each state in all."""

    before: dict[int, Counter[str]] = field(default_factory=dict)
    totals: Counter[str] = field(default_factory=Counter)

    def scores(self, active: Sequence[str]) -> dict[int, float]:
        """Each group's expected number of next messages among the conversations whose latest states are
        ``active``."""
        out: dict[int, float] = defaultdict(float)
        for state in active:
            total = self.totals.get(state, 0)
            if not total:
                continue
            for index, before in self.before.items():
                if before.get(state):
                    out[index] += before[state] / total
        return dict(out)


def _session_rows(db: Database, since: datetime) -> dict[str, list[tuple[str, datetime, str]]]:
    """Customers' messages since ``since`` per session, oldest first: (request id, created at, state)."""
    return logged_sessions(db, since, exclude_channels=(PREPARE_CHANNEL,))


def follow_up_index(db: Database, groups: Sequence[RecurringGroup], since: datetime) -> FollowupIndex:
    """What preceded each group's members, and each state's follow-ups, in the log since ``since``."""
    group_of = {request_id: index for index, group in enumerate(groups) for request_id in group.request_ids}
    index = FollowupIndex()
    for turns in _session_rows(db, since).values():
        for (_, _, state), (request_id, _, _) in zip(turns, turns[1:]):
            index.totals[state] += 1
            if (group := group_of.get(request_id)) is not None:
                index.before.setdefault(group, Counter())[state] += 1
    return index


def active_states(db: Database, now: datetime, active: timedelta = ACTIVE) -> list[str]:
    """The latest state of each conversation with a customer message in the last ``active``."""
    return [turns[-1][2] for turns in _session_rows(db, now - active).values()]


def predicted_first(groups: Sequence[RecurringGroup], scores: dict[int, float],
                    min_score: float = MIN_SCORE) -> list[tuple[RecurringGroup, float]]:
    """The groups with their scores: those predicted at ``min_score`` or more first (highest first), then the rest
    in the order given."""
    predicted = sorted((i for i, s in scores.items() if s >= min_score), key=lambda i: -scores[i])
    rest = [i for i in range(len(groups)) if i not in set(predicted)]
    return [(groups[i], scores.get(i, 0.0)) for i in predicted + rest]
