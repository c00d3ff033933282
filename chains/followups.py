"""Predicted follow-ups (issue 42, part 3): what customers ask next after each answer, learned from sessions.

A conversation is a sequence of *states*, one per customer message: the KB answer that answered it (its answer id),
or a route name for a message no KB answer served (``tool``, ``llm``, ``guard``, ...). :class:`FollowupModel` counts,
within sessions, which KB answer followed each state and each state's KB category, and predicts the next KB answer
from the current state by backing off twice:

    P(next | category) = (count(category -> next) + ALPHA * P(next)) / (count(category) + ALPHA)
    P(next | state)    = (count(state -> next) + BETA * P(next | category)) / (count(state) + BETA)

with ``P(next)`` the answers' overall share as a follow-up (any state), and a state's category its KB answer's
(``orders``, ``refunds`` ...; a route state is its own category). A state seen rarely leans on what customers ask
after any answer of its category, and a category seen rarely on what they ask next in general: with 56 answers and
a few hundred conversations most (answer, next answer) pairs are never seen, while "after an orders answer, another
orders answer" is. ALPHA and BETA were chosen by leave-one-session-out on the demo sessions' dev split
(offline/followup_eval.py; README "Predicted follow-ups"): the category level lifted top-3 there from 0.35 to 0.41,
flat for ALPHA and BETA between 1 and 8. The state itself is never predicted (the customer just
read that answer). Only KB answers are predicted, since only they can be offered as a suggested reply and answered
at once; the model still learns from every message, so "after an order-status lookup, customers ask to change the
address" is learned from tool turns as well.

Pure and cheap: fitting reads (state, next) pairs; :func:`sessions_from_log` turns request-log rows into sessions.
Nothing here loads a model or reads the process settings; the service refits from its database every
``refit_s`` seconds (chains/service.py), so each replica learns from the shared log.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from chains.schema import GUARD_ROUTE, HANDOFF_ROUTE, HUMAN_ROUTE, PREPARE_CHANNEL, SMALL_ROUTE
from chains.turn import Turn
from core.text import language_of
from storage.db import Database
from storage.tables import RequestLog, table_of

MIN_TRANSITIONS = 20  # nothing is suggested until the log holds this many follow-ups to learn from
ALPHA = 2.0          # pseudo-count of the overall follow-up distribution behind each category's counts
BETA = 2.0           # pseudo-count of the category's follow-up distribution behind each state's own counts
MIN_SHARE = 0.05     # a prediction below this probability is not offered as a suggestion
ROW_LIMIT = 20_000   # the newest request rows read per refit
# Served kinds whose top source is the KB answer the customer read (a draft, its verified rewrite, a cached copy, the
# answer a suggestion click led to).
KB_SERVED = frozenset({"draft", "rewrite", "cache", "draft_with_caveat"})


@dataclass
class FollowupModel:
    """Transition counts from states and from their categories, and the overall follow-up distribution.
    ``categories``: answer id -> KB category; without it the category level is left out (P(next | category) is
    then P(next))."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    overall: Counter[str] = field(default_factory=Counter)
    transitions: int = 0
    by_category: dict[str, Counter[str]] = field(default_factory=dict)
    categories: Mapping[str, str] = field(default_factory=dict)
    alpha: float = ALPHA
    beta: float = BETA

    @classmethod
    def fit(cls, sessions: Iterable[Sequence[str]], known: Iterable[str] | None = None,
            categories: Mapping[str, str] | None = None, alpha: float = ALPHA, beta: float = BETA) -> FollowupModel:
        """Learn from sessions, each a sequence of states in order. ``known``: the KB's answer ids; a follow-up
        outside them (an answer since removed, a route name) is learned as a state but never predicted."""
        allowed = set(known) if known is not None else None
        model = cls(categories=dict(categories or {}), alpha=alpha, beta=beta)
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        by_category: dict[str, Counter[str]] = defaultdict(Counter)
        for states in sessions:
            for state, following in zip(states, states[1:]):
                if not is_answer(following) or (allowed is not None and following not in allowed):
                    continue
                counts[state][following] += 1
                if model.categories:
                    by_category[model.category(state)][following] += 1
                model.overall[following] += 1
                model.transitions += 1
        model.counts, model.by_category = dict(counts), dict(by_category)
        return model

    def category(self, state: str) -> str:
        return self.categories.get(state) or state

    def predict(self, state: str, k: int = 3, min_share: float = 0.0) -> list[tuple[str, float]]:
        """The ``k`` most likely next KB answers after ``state``, with their probabilities, best first (ties by
        answer id, so the order is stable); [] when nothing was learned."""
        total_overall = sum(self.overall.values())
        if not total_overall:
            return []
        own = self.counts.get(state, Counter())
        own_total = sum(own.values())
        kin = self.by_category.get(self.category(state), Counter()) if self.categories else Counter()
        kin_total = sum(kin.values())
        candidates = set(own) | set(kin) | {a for a, _ in self.overall.most_common(k + 1)}
        candidates.discard(state)
        scored = []
        for answer in candidates:
            prior = self.overall[answer] / total_overall
            if self.categories:
                prior = (kin[answer] + self.alpha * prior) / (kin_total + self.alpha)
            share = (own[answer] + self.beta * prior) / (own_total + self.beta)
            if share >= min_share:
                scored.append((answer, share))
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:k]

    def summary(self) -> dict[str, Any]:
        return {"transitions": self.transitions, "states": len(self.counts), "answers": len(self.overall)}


def is_answer(state: str) -> bool:
    """A KB answer id, as opposed to a route name standing for a message no KB answer served."""
    return bool(state) and not state.startswith(ROUTE_STATE)


ROUTE_STATE = "route:"


def state_of(route: str, served: str, sources: Sequence[Mapping[str, Any]]) -> str:
    """The state of one answered message: the KB answer the customer read, else ``route:<route>`` (an LLM answer,
    a tool lookup, a refusal, a handoff)."""
    if sources and (route == SMALL_ROUTE or served in KB_SERVED):
        answer_id = str(sources[0].get("answer_id", ""))
        if answer_id:
            return answer_id
    return ROUTE_STATE + (route or "unknown")


def logged_sessions(db: Database, since: datetime, *, exclude_channels: Sequence[str] = (),
                    limit: int = ROW_LIMIT) -> dict[str, list[tuple[str, datetime, str]]]:
    """Each session's messages since ``since`` as (request id, created at, state), oldest first, from the request
    log (the newest ``limit`` rows). Rows of ``exclude_channels`` (the idle-time worker's own requests) are left
    out."""
    table = table_of(RequestLog)
    query = (select(table.c.id, table.c.session_id, table.c.created_at, table.c.route, table.c.served,
                    table.c.sources)
             .where(table.c.created_at >= since, table.c.session_id != "")
             .order_by(table.c.created_at.desc()).limit(limit))
    if exclude_channels:
        query = query.where(table.c.channel.not_in(list(exclude_channels)))
    with db.engine.connect() as connection:
        rows = list(connection.execute(query))
    by_session: dict[str, list[tuple[str, datetime, str]]] = defaultdict(list)
    for request_id, session_id, created_at, route, served, sources in rows:
        by_session[session_id].append((request_id, created_at, state_of(route, served or "", sources or [])))
    return {session_id: sorted(turns, key=lambda t: t[1]) for session_id, turns in by_session.items()}


def sessions_from_log(db: Database, since: datetime, *, exclude_channels: Sequence[str] = (),
                      limit: int = ROW_LIMIT) -> list[list[str]]:
    """The states of each session's messages (sessions of two or more), oldest first: :func:`logged_sessions`."""
    sessions = logged_sessions(db, since, exclude_channels=exclude_channels, limit=limit)
    return [[state for _, _, state in turns] for turns in sessions.values() if len(turns) > 1]


# Routes after which no suggestion is offered: a refusal, a handoff, a message to a person (the bot sends nothing).
NO_SUGGESTIONS = frozenset({GUARD_ROUTE, HANDOFF_ROUTE, HUMAN_ROUTE})


class Suggester:
    """The follow-up model the service serves from, refitted from the request log every ``refit_s`` seconds in a
    thread of its own (a request never waits for a fit; until the first fit ends, nothing is suggested).

    ``titles``: answer id -> (title, category) of the KB answers that may be suggested (called at each refit, so a
    KB change shows up with the next fit); ``exclude_channels``: log channels not learned from (the idle-time worker's)."""

    def __init__(self, db: Database, titles: Callable[[], Mapping[str, tuple[str, str]]], *, refit_s: float = 600.0,
                 window: timedelta = timedelta(days=30), k: int = 3, exclude_channels: Sequence[str] = (),
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.db, self.titles, self.refit_s, self.window, self.k = db, titles, refit_s, window, k
        self.exclude_channels = tuple(exclude_channels)
        self.clock = clock
        self.model = FollowupModel()
        self._titles: Mapping[str, tuple[str, str]] = {}  # answer id -> (title, its language)
        self._fitted_at = -float("inf")
        self._lock = threading.Lock()
        self._fitting = False
        self.last_error = ""

    def refit(self) -> FollowupModel:
        """Fit now, in the caller's thread, from the log's sessions of the last ``window``."""
        answers = {answer_id: found for answer_id, found in self.titles().items() if found[0]}
        titles = {answer_id: (title, language_of(title)) for answer_id, (title, _) in answers.items()}
        sessions = sessions_from_log(self.db, self.clock() - self.window, exclude_channels=self.exclude_channels)
        model = FollowupModel.fit(sessions, known=titles,
                                  categories={answer_id: category for answer_id, (_, category) in answers.items()
                                              if category})
        self._titles, self.model = titles, model  # each a single assignment: readers see the old or the new one
        return model

    def refit_quietly(self) -> None:
        """:meth:`refit`, keeping the last model when it fails (``last_error`` says why; the next refit tries again)."""
        self._fitted_at = time.monotonic()
        try:
            self.refit()
            self.last_error = ""
        except Exception as exc:
            self.last_error = f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"

    def refit_in_background(self) -> None:
        """Start a fit in a thread of its own, unless one runs or the last began under ``refit_s`` ago."""
        with self._lock:
            if self._fitting or time.monotonic() - self._fitted_at < self.refit_s:
                return
            self._fitting = True

        def fit() -> None:
            try:
                self.refit_quietly()
            finally:
                self._fitting = False

        threading.Thread(target=fit, name="tandem-followups-fit", daemon=True).start()

    def offer(self, turn: Turn) -> None:
        """Set the suggested replies under ``turn``'s answer, noted in its trace (the console's click-through reads
        "offered" and "clicked" steps). None for a cancelled answer or the idle-time worker's own requests."""
        if turn.cancelled or turn.request.channel == PREPARE_CHANNEL or not turn.route or turn.suggestions:
            return  # (suggestions already set: the small tier's choices of a "which one?" question stand)
        try:
            turn.suggestions = self.suggest(turn.route, turn.served, turn.sources, turn.language)
        except Exception as exc:  # a suggestion is a convenience: the answer goes out without it
            turn.note("suggest", "failed", error=f"{exc.__class__.__name__}: {exc}"[:200])
            return
        if turn.suggestions:
            turn.note("suggest", "offered", options=[s["answer_id"] for s in turn.suggestions])

    def suggest(self, route: str, served: str, sources: Sequence[Mapping[str, Any]],
                language: str = "en") -> list[dict[str, Any]]:
        """The suggested replies after an answer: the top predicted follow-ups in the customer's ``language`` with
        their titles and probability, best first; [] after a refusal or a handoff, or when nothing was learned."""
        self.refit_in_background()
        if route in NO_SUGGESTIONS or self.model.transitions < MIN_TRANSITIONS:
            return []
        titles = self._titles
        predictions = self.model.predict(state_of(route, served, sources), len(titles), MIN_SHARE)
        return [{"answer_id": answer_id, "title": titles[answer_id][0], "score": round(share, 3)}
                for answer_id, share in predictions
                if answer_id in titles and titles[answer_id][1] == language][:self.k]
