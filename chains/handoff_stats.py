"""The handoff's numbers, computed from what every replica stores (``conversation_events``, ``chat_messages``,
``request_log``), so the console and each replica's ``/metrics`` show the same figures:

- time to pick up: from a handoff (queued for a person) until an operator claimed it;
- time to the first human reply: from a handoff until the first operator message that followed it;
- handoffs by reason (the trigger: button, asked, rule, answer_check, vip, repeat);
- the share of conversations resolved without a person: customer sessions active in the window that were never
  handed to a person in it, of all such sessions.

:class:`HandoffCollector` serves them at ``/metrics`` as gauges over the last day (``window="1d"``), read from the
database at every scrape; the per-process histograms (``tandem_handoff_pickup_seconds``,
``tandem_handoff_first_reply_seconds``) are observed as the changes happen (chains/conversation.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from sqlmodel import col, select

from storage.db import Database
from storage.tables import ChatMessage, ConversationEvent, RequestLog, utcnow

WAITING, HUMAN = "waiting", "human"
CUSTOMER_CHANNELS = ("api", "ui", "openai")  # chains/service.py: the channels a customer writes on
WINDOW = timedelta(days=1)  # what /metrics reports


@dataclass
class HandoffNumbers:
    pickup_s: list[float] = field(default_factory=list)         # one per claim in the window
    first_reply_s: list[float] = field(default_factory=list)    # one per handoff in the window that got a reply
    by_reason: dict[str, int] = field(default_factory=dict)      # handoffs in the window per trigger
    sessions: int = 0                                            # customer sessions active in the window
    handed_over: int = 0                                         # of them, handed to a person in the window

    @property
    def handoffs(self) -> int:
        return sum(self.by_reason.values())

    @property
    def resolved_without_person(self) -> float | None:
        """Sessions never handed to a person, of all sessions; None without any session."""
        return (self.sessions - self.handed_over) / self.sessions if self.sessions else None

    def summary(self) -> dict[str, Any]:
        return {"handoffs": self.handoffs, "by_reason": dict(sorted(self.by_reason.items())),
                "pickup_p50_s": _quantile(self.pickup_s, 0.5), "pickup_p90_s": _quantile(self.pickup_s, 0.9),
                "pickups": len(self.pickup_s), "first_reply_p50_s": _quantile(self.first_reply_s, 0.5),
                "first_reply_p90_s": _quantile(self.first_reply_s, 0.9), "first_replies": len(self.first_reply_s),
                "sessions": self.sessions, "handed_over": self.handed_over,
                "resolved_without_person": self.resolved_without_person}


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1], 3)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def handoff_numbers(db: Database, since: datetime | None = None, until: datetime | None = None) -> HandoffNumbers:
    """The numbers for events at or after ``since`` (None: all) and before ``until`` (None: now)."""
    until = until or utcnow()
    out = HandoffNumbers()

    def within(column):  # the window's bounds on a created_at column
        bounds = [col(column) < until]
        if since is not None:
            bounds.append(col(column) >= since)
        return bounds

    with db.session() as session:
        events = session.exec(select(ConversationEvent).where(
            col(ConversationEvent.to_status).in_([WAITING, HUMAN]), *within(ConversationEvent.created_at))
            .order_by(col(ConversationEvent.id))).all()
        handoffs = [e for e in events if e.to_status == WAITING and e.from_status != HUMAN]  # a requeue is no handoff
        handed = sorted({e.session_id for e in handoffs})
        replies = session.exec(select(ChatMessage.session_id, ChatMessage.created_at).where(
            ChatMessage.role == "operator", col(ChatMessage.session_id).in_(handed),
            *within(ChatMessage.created_at)).order_by(col(ChatMessage.id))).all() if handed else []
        sessions = set(session.exec(select(RequestLog.session_id).distinct().where(
            col(RequestLog.channel).in_(CUSTOMER_CHANNELS), RequestLog.session_id != "",
            *within(RequestLog.created_at))).all())
    for event in events:
        if event.to_status == HUMAN and event.from_status == WAITING and isinstance(event.detail, dict) \
                and "waited_s" in event.detail:
            out.pickup_s.append(float(event.detail["waited_s"]))
    for event in handoffs:
        out.by_reason[event.trigger or "unknown"] = out.by_reason.get(event.trigger or "unknown", 0) + 1
    # The first operator message after each handoff, before the conversation's next handoff.
    starts: dict[str, list[datetime]] = {}
    for event in handoffs:
        starts.setdefault(event.session_id, []).append(_aware(event.created_at))
    sent: dict[str, list[datetime]] = {}
    for session_id, created_at in replies:
        sent.setdefault(session_id, []).append(_aware(created_at))
    for session_id, begun in starts.items():
        for i, start in enumerate(begun):
            end = begun[i + 1] if i + 1 < len(begun) else None
            first = next((t for t in sent.get(session_id, []) if t >= start and (end is None or t < end)), None)
            if first is not None:
                out.first_reply_s.append((first - start).total_seconds())
    everyone = sessions | set(handed)
    out.sessions, out.handed_over = len(everyone), len(set(handed))
    return out


class HandoffCollector:
    """Prometheus collector: the last day's handoff numbers, read from the database at each scrape (so every replica
    reports the same). :func:`expose` points it at the serving process's database."""

    def __init__(self) -> None:
        self.db: Callable[[], Database | None] = lambda: None

    def describe(self) -> list:
        return []  # read at scrape time; nothing to check at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        db = self.db()
        if db is None:
            return
        try:
            numbers = handoff_numbers(db, utcnow() - WINDOW)
        except Exception:  # a scrape never fails on a broken database: these gauges are simply absent
            return
        window = "1d"
        by_reason = GaugeMetricFamily("tandem_handoff_window_handoffs", "Conversations handed to a person in the "
                                      "window, by reason (trigger).", labels=["window", "trigger"])
        for trigger, n in sorted(numbers.by_reason.items()):
            by_reason.add_metric([window, trigger], n)
        yield by_reason
        for name, values, what, counted in (
                ("pickup", numbers.pickup_s, "from a handoff until an operator claimed it", "claims"),
                ("first_reply", numbers.first_reply_s, "from a handoff until the first operator message",
                 "handoffs answered by a person")):
            gauge = GaugeMetricFamily(f"tandem_handoff_window_{name}_seconds", f"Seconds {what}, quantiles over the "
                                      "window (stored events of every replica).", labels=["window", "quantile"])
            for q in (0.5, 0.9):
                value = _quantile(values, q)
                if value is not None:
                    gauge.add_metric([window, str(q)], value)
            yield gauge
            count = GaugeMetricFamily(f"tandem_handoff_window_{name}_count", f"The {counted} in the window that the "
                                      f"{name} quantiles are over.", labels=["window"])
            count.add_metric([window], len(values))
            yield count
        sessions = GaugeMetricFamily("tandem_handoff_window_sessions", "Customer conversations active in the window.",
                                     labels=["window"])
        sessions.add_metric([window], numbers.sessions)
        yield sessions
        if numbers.resolved_without_person is not None:
            share = GaugeMetricFamily("tandem_handoff_window_resolved_without_person_ratio", "Share of the window's "
                                      "customer conversations never handed to a person.", labels=["window"])
            share.add_metric([window], round(numbers.resolved_without_person, 4))
            yield share


COLLECTOR = HandoffCollector()
_registered = False


def expose(db: Callable[[], Database | None]) -> None:
    """Serve the handoff numbers of this database at /metrics (registered once per process; the last caller's
    database is read)."""
    global _registered
    COLLECTOR.db = db
    if not _registered:
        REGISTRY.register(COLLECTOR)
        _registered = True
