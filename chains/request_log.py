"""The request log's writer: each request's row and its conversation messages, committed before the answer returns.

Rows are written by group commit: requests that finish while another one is writing share the next transaction.
Under concurrency most requests then wait for a commit someone else pays for, instead of each paying its own in
turn. A failing database write never fails the customer: the rows wait in a backlog, are retried with the next
write, and the backlog's size and the last error are reported to operators (``status()``, ``/healthz``).
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from chains import metrics
from storage import prepared_store
from storage.db import Database
from storage.tables import ChatMessage, ChatSession, Handoff, RequestLog, utcnow

LOG_BATCH = 256  # rows per transaction at most: a long backlog drains in bounded steps


@dataclass(slots=True)
class PendingRow:
    """A request row and its conversation messages, waiting for a commit."""

    row: RequestLog
    extra: list[Any]
    new_session: bool
    owner: str = ""
    written: bool = False
    prepared_hit: tuple[str, str] | None = None  # (namespace, entry key) of a prepared answer the cache served


class RequestLogWriter:
    def __init__(self, db: Database):
        self.db = db
        self.backlog: deque[PendingRow] = deque(maxlen=100_000)
        self._queue_lock = threading.Lock()  # guards the backlog itself, held for microseconds
        self.lock = threading.Lock()  # one writer at a time; it commits every row waiting
        self.failures = 0
        self.last_error = ""

    def add(self, pending: PendingRow) -> None:
        """Queue a request's rows and commit them (with every row waiting) before returning, unless a writer busy
        meanwhile committed them with its own."""
        with self._queue_lock:
            self.backlog.append(pending)
        with self.lock:
            if not pending.written:  # else the writer before us committed it with its own rows
                self._flush()

    def _flush(self) -> None:
        """Commit the waiting rows, oldest first, a batch per transaction; stop at a failure (they stay)."""
        while True:
            with self._queue_lock:
                batch = list(itertools.islice(self.backlog, LOG_BATCH))
            if not batch or not self._write(batch):
                return
            with self._queue_lock:  # only this writer removes rows, so the committed ones lead the backlog
                for pending in batch:
                    pending.written = True
                while self.backlog and self.backlog[0].written:
                    self.backlog.popleft()

    def _write(self, batch: list[PendingRow]) -> bool:
        try:
            with self.db.session() as session:
                open_or_touch_sessions(session, batch)
                # Fresh copies on every try: after a failed commit SQLAlchemy may keep the objects as
                # "persistent" with a primary key, and re-adding them would then silently insert nothing.
                for pending in batch:  # in arrival order: a conversation's messages keep their order
                    session.add(fresh(pending.row))
                    session.add_all([fresh(item) for item in pending.extra])
                    if pending.prepared_hit is not None:  # a prepared answer served: its hit counts with the row
                        session.execute(prepared_store.hit_statement(*pending.prepared_hit, pending.row.created_at))
                session.commit()
            return True
        except Exception as exc:  # locked, read-only or full database: keep the rows, tell operators
            self.failures += 1
            self.last_error = f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}"
            metrics.LOG_WRITE_FAILURES.inc()
            return False

    def status(self) -> dict[str, Any]:
        return {"log_backlog": len(self.backlog), "log_failures": self.failures, "last_log_error": self.last_error}


def open_or_touch_sessions(session: Any, batch: list[PendingRow]) -> None:
    """One ChatSession row per conversation in the batch: created for a new one, its ``updated_at`` moved on for
    a known one. A session minted for its first request has no row yet, so it is not looked up."""
    first: dict[str, PendingRow] = {}
    for pending in batch:
        first.setdefault(pending.row.session_id, pending)
    for session_id, opener in first.items():
        known = None if opener.new_session else session.get(ChatSession, session_id)
        if known is None:
            session.add(ChatSession(id=session_id, user_id=opener.row.user_id, owner=opener.owner))
        else:
            known.updated_at = utcnow()
            session.add(known)


def fresh(item: Any) -> Any:
    """A new, unattached copy of a row; a message's autoincrement id is left for the database to assign."""
    values = item.model_dump(exclude={"id"} if isinstance(item, (ChatMessage, Handoff)) else set())
    return type(item).model_validate(values)
