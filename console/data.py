"""What the console reads and writes: the request log and feedback frames (ops.logframes), handoffs, app health.

Text in the log is PII-masked upstream by the service; feedback comments and hand-off notes are masked on
write too, and again here (rows written before masking existed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import select

from ops.logframes import masked
from storage.db import Database
from storage.tables import Feedback, Handoff, table_of

TIME_RANGES: dict[str, timedelta | None] = {
    "last 15 min": timedelta(minutes=15),
    "last 1 h": timedelta(hours=1),
    "last 24 h": timedelta(hours=24),
    "last 7 d": timedelta(days=7),
    "all": None,
}
def since_for(range_label: str, now: datetime | None = None) -> datetime | None:
    if range_label not in TIME_RANGES:
        raise ValueError(f"unknown time range {range_label!r}; choose one of {', '.join(TIME_RANGES)}")
    span = TIME_RANGES[range_label]
    if span is None:
        return None
    # SQLModel's datetime columns take and return timezone-aware UTC values.
    return (now or datetime.now(UTC)) - span


def feedback_for(db: Database, request_id: str, mask_pii: bool = True) -> list[dict[str, Any]]:
    table = table_of(Feedback)
    with db.engine.connect() as conn:
        rows = conn.execute(select(table).where(table.c.request_id == request_id))
        return [{**dict(r._mapping), "comment": masked(r.comment, mask_pii)} for r in rows]


def open_handoffs(db: Database, mask_pii: bool = True) -> pd.DataFrame:
    table = table_of(Handoff)
    with db.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(
            select(table).where(table.c.status == "open").order_by(table.c.created_at))]
    rows = [{**row, "note": masked(row.get("note"), mask_pii)} for row in rows]
    return pd.DataFrame(rows, columns=["id", "created_at", "session_id", "user_id", "request_id", "note", "status"])


def mark_handoff_done(db: Database, handoff_id: int) -> bool:
    with db.session() as session:
        row = session.get(Handoff, handoff_id)
        if row is None:
            return False
        row.status = "done"
        session.add(row)
        session.commit()
        return True


def app_health(host: str, port: int, timeout_s: float = 1.0) -> dict[str, Any] | None:
    """The chat app's /healthz JSON, or None when the app is not reachable (never raises)."""
    import httpx

    # A wildcard bind address is not something one can connect to.
    target = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    try:
        response = httpx.get(f"http://{target}:{port}/healthz", timeout=timeout_s)
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    return body if isinstance(body, dict) else None
