"""The request log as a flat DataFrame (one row per request; scores and stage latencies as columns) and the
feedback as another: what the console's pages, the what-if replay and the ops autopilot all read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import select

from chains.schema import PREPARE_CHANNEL
from core.pii import mask
from storage.db import Database
from storage.tables import Feedback, RequestLog, table_of

STAGES = ("guard", "cache", "embed", "score", "retrieve", "generate")
# Routing overhead before a tier starts answering (the L_sched of the replay model).
SCHED_STAGES = ("guard", "cache", "embed", "score")
SCORE_KEYS = ("p_llm", "kb_top", "kb_margin", "draft_quality", "kb_rewrite_floor")
ROW_LIMIT = 100_000


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
            "intent": row.get("intent") or "", "degraded": bool(row.get("degraded")), "fallback": bool(row.get("fallback")),
            "cache_hit": bool(row.get("cache_hit")), "cancelled": bool(row.get("cancelled")), "total_ms": total,
            "findings": row.get("findings") or [], "served": row.get("served") or "",
            "rejected_text": row.get("rejected_text") or "",
            "rewritten": any(isinstance(s, dict) and s.get("stage") == "rewrite" for s in row.get("trace") or []),
            "checked": any(isinstance(s, dict) and s.get("stage") == "check" for s in row.get("trace") or []),
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


_COLUMNS = ["id", "created_at", "session_id", "user_id", "channel", "text", "answer", "route", "intent", "degraded",
            "fallback", "cache_hit", "cancelled", "findings", "served", "rejected_text", "rewritten", "checked", "total_ms",
            "model", "prompt_tokens",
            "completion_tokens", "error",
            "kb_version", "settings_version", "scores", "reasons", "trace", "sources", "latency",
            *SCORE_KEYS, *(f"ms_{s}" for s in STAGES), "sched_ms"]


def load_requests(db: Database, since: datetime | None = None, limit: int = ROW_LIMIT,
                  customers_only: bool = False) -> pd.DataFrame:
    """Newest first; one query for the whole page (core select: no ORM objects for thousands of rows).
    ``customers_only`` leaves out the idle-time worker's own requests (channel prepare): the ops series and the tuner
    read customers' traffic; the console's pages show every row."""
    table = table_of(RequestLog)
    query = select(table).order_by(table.c.created_at.desc()).limit(limit)
    if customers_only:
        query = query.where(table.c.channel != PREPARE_CHANNEL)
    if since is not None:
        query = query.where(table.c.created_at >= since)
    with db.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(query)]
    return flatten_requests(rows)


def load_feedback(db: Database, since: datetime | None = None, mask_pii: bool = True) -> pd.DataFrame:
    table = table_of(Feedback)
    query = select(table.c.request_id, table.c.rating, table.c.comment, table.c.created_at)
    if since is not None:
        query = query.where(table.c.created_at >= since)
    with db.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(query)]
    rows = [{**row, "comment": masked(row.get("comment"), mask_pii)} for row in rows]
    return pd.DataFrame(rows, columns=["request_id", "rating", "comment", "created_at"])




def masked(text: str | None, mask_pii: bool = True) -> str:
    """What an operator's screen shows of customer text: masked unless the deployment keeps personal data
    (TANDEM_MASK_PII=false, passed in by the caller)."""
    return mask(text or "") if mask_pii else (text or "")
