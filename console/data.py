"""What the console reads and writes: the request log as a flat DataFrame, feedback, handoffs, app health.

Text in the log is PII-masked upstream by the service; feedback comments and hand-off notes are masked on
write too, and again here (rows written before masking existed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import select

from core.pii import mask
from core.settings import get_settings
from storage.db import Database
from storage.tables import Feedback, Handoff, RequestLog, table_of

TIME_RANGES: dict[str, timedelta | None] = {
    "last 15 min": timedelta(minutes=15),
    "last 1 h": timedelta(hours=1),
    "last 24 h": timedelta(hours=24),
    "last 7 d": timedelta(days=7),
    "all": None,
}
STAGES = ("guard", "cache", "embed", "score", "retrieve", "generate")
# Routing overhead before a tier starts answering (the L_sched of the replay model).
SCHED_STAGES = ("guard", "cache", "embed", "score")
SCORE_KEYS = ("p_llm", "kb_top", "kb_margin", "draft_quality")
ROW_LIMIT = 100_000


def since_for(range_label: str, now: datetime | None = None) -> datetime | None:
    if range_label not in TIME_RANGES:
        raise ValueError(f"unknown time range {range_label!r}; choose one of {', '.join(TIME_RANGES)}")
    span = TIME_RANGES[range_label]
    if span is None:
        return None
    # SQLModel's datetime columns take and return timezone-aware UTC values.
    return (now or datetime.now(UTC)) - span


def _as_number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def flatten_requests(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per request with scores and stage latencies as columns; raw JSON kept for the detail view."""
    records = []
    for row in rows:
        scores = row.get("scores") or {}
        latency = row.get("latency_ms") or {}
        total = _as_number(latency.get("total", row.get("total_ms") or 0.0))
        record = {
            "id": row["id"], "created_at": row["created_at"], "session_id": row.get("session_id") or "",
            "user_id": row.get("user_id") or "", "channel": row.get("channel") or "",
            "text": row.get("text") or "", "answer": row.get("answer") or "", "route": row.get("route") or "",
            "degraded": bool(row.get("degraded")), "fallback": bool(row.get("fallback")),
            "cache_hit": bool(row.get("cache_hit")), "cancelled": bool(row.get("cancelled")), "total_ms": total,
            "model": row.get("model") or "", "prompt_tokens": int(row.get("prompt_tokens") or 0),
            "completion_tokens": int(row.get("completion_tokens") or 0), "error": row.get("error") or "",
            "kb_version": row.get("kb_version") or "", "settings_version": int(row.get("settings_version") or 0),
            "scores": scores, "reasons": row.get("reasons") or [], "trace": row.get("trace") or [],
            "sources": row.get("sources") or [], "latency": latency,
        }
        for key in SCORE_KEYS:
            record[key] = _as_number(scores.get(key))
        for stage in STAGES:
            record[f"ms_{stage}"] = _as_number(latency.get(stage))
        record["sched_ms"] = sum(v for v in (_as_number(latency.get(s)) for s in SCHED_STAGES) if v == v)
        records.append(record)
    frame = pd.DataFrame.from_records(records, columns=_COLUMNS)
    frame["created_at"] = pd.to_datetime(frame["created_at"])
    frame["tokens"] = frame["prompt_tokens"] + frame["completion_tokens"]
    return frame


_COLUMNS = ["id", "created_at", "session_id", "user_id", "channel", "text", "answer", "route", "degraded",
            "fallback", "cache_hit", "cancelled", "total_ms", "model", "prompt_tokens", "completion_tokens", "error",
            "kb_version", "settings_version", "scores", "reasons", "trace", "sources", "latency",
            *SCORE_KEYS, *(f"ms_{s}" for s in STAGES), "sched_ms"]


def load_requests(db: Database, since: datetime | None = None, limit: int = ROW_LIMIT) -> pd.DataFrame:
    """Newest first; one query for the whole page (core select: no ORM objects for thousands of rows)."""
    table = table_of(RequestLog)
    query = select(table).order_by(table.c.created_at.desc()).limit(limit)
    if since is not None:
        query = query.where(table.c.created_at >= since)
    with db.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(query)]
    return flatten_requests(rows)


def load_feedback(db: Database, since: datetime | None = None) -> pd.DataFrame:
    table = table_of(Feedback)
    query = select(table.c.request_id, table.c.rating, table.c.comment, table.c.created_at)
    if since is not None:
        query = query.where(table.c.created_at >= since)
    with db.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(query)]
    rows = [{**row, "comment": _masked(row.get("comment"))} for row in rows]
    return pd.DataFrame(rows, columns=["request_id", "rating", "comment", "created_at"])


def _masked(text: str | None) -> str:
    return mask(text or "") if get_settings().mask_pii else (text or "")


def feedback_for(db: Database, request_id: str) -> list[dict[str, Any]]:
    table = table_of(Feedback)
    with db.engine.connect() as conn:
        rows = conn.execute(select(table).where(table.c.request_id == request_id))
        return [{**dict(r._mapping), "comment": _masked(r.comment)} for r in rows]


def open_handoffs(db: Database) -> pd.DataFrame:
    table = table_of(Handoff)
    with db.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(
            select(table).where(table.c.status == "open").order_by(table.c.created_at))]
    rows = [{**row, "note": _masked(row.get("note"))} for row in rows]
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
