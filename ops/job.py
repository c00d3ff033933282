"""One pass of the ops autopilot: read the request log, update the detector, open/resolve alerts, notify the
webhook, and (when switched on, once per window) take one tuner step.

It runs every ``TANDEM_OPS_EVERY_MIN`` minutes inside the app (`OpsLoop`), or as `tandem ops run` from cron, or
`tandem ops watch` in a terminal. A lease row in the database lets only one process at a time do it, so several
app replicas do not all alert and tune at once. ``now`` is a parameter throughout: tests drive it with a
simulated clock, the loop with the wall clock.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from chains.tiers.base import SMALL_ROUTE
from ops import alerts, tuner
from ops.detector import DetectorParams, SeriesState, evaluate, minute_series
from ops.logframes import load_feedback, load_requests
from storage import policy_store, retention
from storage.db import Database
from storage.tables import OpsEvent, OpsLease, table_of, utcnow

log = logging.getLogger(__name__)
LEASE_NAME = "ops"
TUNER_KINDS = ("applied", "kept", "skipped", "waiting", "confirmed", "rolled_back", "superseded")


@dataclass
class OpsReport:
    ran: bool                                   # False when another process holds the lease
    states: list[SeriesState] = field(default_factory=list)
    new_alerts: list[Any] = field(default_factory=list)
    delivered: int = 0
    tuner_event: OpsEvent | None = None
    purged: retention.PurgeReport | None = None  # when TANDEM_RETENTION_DAYS is set
    note: str = ""


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def take_lease(db: Database, now: datetime, holder: str, ttl: timedelta = timedelta(minutes=3),
               name: str = LEASE_NAME) -> bool:
    """Compare-and-set on one row: free (expired) or already ours -> ours until now + ttl. ``name``: which job's
    lease (the ops job's, or the idle-time worker's, ops/prepared.py)."""
    table = table_of(OpsLease)
    until = now + ttl
    with db.engine.begin() as conn:
        changed = conn.execute(update(table).where(table.c.name == name)
                               .where((table.c.until < _aware(now)) | (table.c.holder == holder))
                               .values(holder=holder, until=_aware(until))).rowcount
    if changed:
        return True
    try:
        with db.session() as session:
            if session.get(OpsLease, name) is not None:
                return False
            session.add(OpsLease(name=name, holder=holder, until=_aware(until)))
            session.commit()
            return True
    except IntegrityError:  # another process inserted it first
        return False


def release_lease(db: Database, holder: str) -> None:
    """Give the lease up (a one-shot `tandem ops run` does, so the next cron run need not wait for it to expire)."""
    table = table_of(OpsLease)
    with db.engine.begin() as conn:
        conn.execute(update(table).where(table.c.name == LEASE_NAME).where(table.c.holder == holder)
                     .values(holder="", until=_aware(utcnow() - timedelta(seconds=1))))


def _aware(moment: datetime) -> datetime:
    """Timestamps are UTC with the zone attached (SQLModel refuses naive ones; SQLite reads them back naive)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def window_frame(db: Database, since: datetime) -> pd.DataFrame:
    """Requests since ``since`` with the feedback joined on: ``negative_feedback`` (a thumbs-down) and
    ``label_correct_small`` (an answer kept on the small tier with a rating: 1 up, 0 down) for the quality guard."""
    frame = load_requests(db, since=_aware(since), customers_only=True)
    feedback = load_feedback(db, since=_aware(since))
    rating = feedback.groupby("request_id")["rating"].min() if not feedback.empty else pd.Series(dtype=float)
    frame["rating"] = frame["id"].map(rating)
    frame["negative_feedback"] = (frame["rating"] < 0).astype(float)
    small = frame["route"] == SMALL_ROUTE
    frame["label_correct_small"] = (frame["rating"] > 0).astype(float).where(small & frame["rating"].notna())
    return frame


def _utc(frame: pd.DataFrame) -> pd.DataFrame:
    if len(frame) and frame["created_at"].dt.tz is None:
        frame = frame.assign(created_at=frame["created_at"].dt.tz_localize("UTC"))
    return frame


def detect(db: Database, now: datetime, params: DetectorParams | None = None) -> list[SeriesState]:
    params = params or DetectorParams()
    since = now - timedelta(minutes=params.history_min + params.recent_min + 1)
    frame = _utc(load_requests(db, since=_aware(since), customers_only=True))
    feedback = load_feedback(db, since=_aware(since))
    return evaluate(minute_series(frame, feedback), now, params)


def tuner_due(db: Database, now: datetime, window_min: int) -> bool:
    for event in tuner.events(db, 30):
        if event.kind in TUNER_KINDS:
            return _aware(now) - _aware(event.created_at) >= timedelta(minutes=window_min)
    return True


def run_once(db: Database, now: datetime | None = None, *, webhook: str = "", price_per_1k_tokens: float = 0.002,
             holder: str | None = None, force_tuner: bool = False,
             params: DetectorParams | None = None, keep_lease: bool = True, retention_days: float = 0.0) -> OpsReport:
    """Detect, reconcile alerts, notify, take a tuner step when it is due (or ``force_tuner``), and purge message
    text older than ``retention_days`` (0 keeps it; storage/retention.py).

    The lease is kept (renewed by the next pass) unless ``keep_lease`` is False, as for a one-shot run."""
    now = now or utcnow()
    holder = holder or holder_id()
    if not take_lease(db, now, holder):
        return OpsReport(ran=False, note="another process runs the ops job now (its lease has not expired)")
    try:
        report = _pass(db, now, webhook, price_per_1k_tokens, force_tuner, params)
        if retention_days > 0:  # under the lease: one replica purges
            report.purged = retention.purge(db, retention_days, now)
        return report
    finally:
        if not keep_lease:
            release_lease(db, holder)


def _pass(db: Database, now: datetime, webhook: str, price_per_1k_tokens: float, force_tuner: bool,
          params: DetectorParams | None) -> OpsReport:
    states = detect(db, now, params)
    new = alerts.reconcile(db, states, now)
    delivered = alerts.notify(db, webhook, new) if webhook and new else 0
    report = OpsReport(ran=True, states=states, new_alerts=new, delivered=delivered)
    config = policy_store.current(db).autotune
    if config.get("enabled") and (force_tuner or tuner_due(db, now, int(config["window_min"]))):
        window = _utc(window_frame(db, now - timedelta(minutes=int(config["window_min"]))))
        report.tuner_event = tuner.tune(db, window, now, config, any(a.state == "open" for a in alerts.open_alerts(db)),
                                        price_per_1k_tokens)
        if report.tuner_event.kind == "rolled_back" and webhook:
            rollback_alert = max((a for a in alerts.open_alerts(db) if a.series == "autotune"), key=lambda a: a.id or 0)
            report.delivered += alerts.notify(db, webhook, [rollback_alert])
    return report


class PeriodicThread:
    """A pass on a daemon thread every ``every_s`` seconds, until stopped. A failed pass must not kill the loop (or
    the app): it is logged and kept in ``last_error``, and the next one retries. Subclasses say what a pass does."""

    thread_name = "tandem-periodic"

    def __init__(self, every_s: float):
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self.last_error = ""

    def enabled(self) -> bool:
        return self.every_s > 0

    def start(self) -> Any:
        if self.enabled():
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def one_pass(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.one_pass()
                self.last_error = ""
            except Exception as exc:
                self.last_error = f"{exc.__class__.__name__}: {exc}"
                log.exception("%s: a pass failed", self.thread_name)


class OpsLoop(PeriodicThread):
    """The ops job on a daemon thread inside the app: every ``every_min`` minutes, until stopped."""

    thread_name = "tandem-ops"

    def __init__(self, db: Database, every_min: float, retention_days: float, webhook: str = "",
                 price_per_1k_tokens: float = 0.002):
        """``retention_days``: TANDEM_RETENTION_DAYS, passed by the app (0 keeps everything)."""
        super().__init__(every_min * 60.0)
        self.db, self.webhook, self.price = db, webhook, price_per_1k_tokens
        self.retention_days = retention_days
        self.last: OpsReport | None = None

    def one_pass(self) -> None:
        self.last = run_once(self.db, webhook=self.webhook, price_per_1k_tokens=self.price,
                             retention_days=self.retention_days)
