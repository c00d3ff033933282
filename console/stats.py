"""Overview aggregations over the flat request DataFrame (pure: DataFrame in, numbers/DataFrames out)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from chains.followups import state_of
from chains.schema import CLARIFY_SERVED
from chains.tiers import TIERS
from chains.tiers.base import LLM_ROUTE, SMALL_ROUTE
from ops.logframes import STAGES

# Routes settled before the tier step and the first tiers' (their chart colours stay), then every other registered
# tier's: a new tier's route (handoff) is charted without an edit here.
_FIRST = ("guard", "cache", "tool", SMALL_ROUTE, LLM_ROUTE)
ROUTES = (*_FIRST, *sorted(name for name in TIERS if name not in _FIRST and name != "answered"))
BUCKETS = {"last 15 min": "1min", "last 1 h": "5min", "last 24 h": "1h", "last 7 d": "6h"}


def bucket_for(range_label: str, frame: pd.DataFrame) -> str:
    if range_label in BUCKETS:
        return BUCKETS[range_label]
    if frame.empty:
        return "1h"
    span = frame["created_at"].max() - frame["created_at"].min()
    for limit, freq in ((pd.Timedelta(hours=2), "5min"), (pd.Timedelta(days=2), "1h"), (pd.Timedelta(days=14), "6h")):
        if span <= limit:
            return freq
    return "1D"


def traffic_over_time(frame: pd.DataFrame, freq: str) -> pd.DataFrame:
    """Counts per time bucket and route, long format (time, route, requests)."""
    if frame.empty:
        return pd.DataFrame(columns=["time", "route", "requests"])
    counts = (frame.assign(time=frame["created_at"].dt.floor(freq))
              .groupby(["time", "route"]).size().rename("requests").reset_index())
    return counts


def route_shares(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return pd.DataFrame(columns=["route", "requests", "share"])
    counts = frame["route"].replace("", "unknown").value_counts().rename_axis("route").rename("requests").reset_index()
    counts["share"] = counts["requests"] / counts["requests"].sum()
    return counts


def _percentiles(values: pd.Series) -> dict[str, float]:
    values = values.dropna()
    if values.empty:
        return {"p50": math.nan, "p95": math.nan, "p99": math.nan, "n": 0}
    p50, p95, p99 = np.percentile(values.to_numpy(dtype=float), [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "n": int(values.size)}


def latency_by_route(frame: pd.DataFrame) -> pd.DataFrame:
    rows = [{"route": route, **_percentiles(group["total_ms"])} for route, group in frame.groupby("route")]
    return pd.DataFrame(rows, columns=["route", "p50", "p95", "p99", "n"])


def latency_by_stage(frame: pd.DataFrame) -> pd.DataFrame:
    rows = [{"stage": stage, **_percentiles(frame[f"ms_{stage}"])} for stage in STAGES]
    rows.append({"stage": "total", **_percentiles(frame["total_ms"])})
    return pd.DataFrame([r for r in rows if r["n"]], columns=["stage", "p50", "p95", "p99", "n"])


def summary(frame: pd.DataFrame, feedback: pd.DataFrame, price_per_1k_tokens: float) -> dict[str, Any]:
    """Headline numbers. Cost counts every token an LLM produced or read, rewrites of small drafts included."""
    n = int(len(frame))
    tokens = int(frame["tokens"].sum()) if n else 0
    ratings = feedback["rating"].dropna() if not feedback.empty else pd.Series(dtype=float)
    return {
        "requests": n,
        "cache_hit_rate": float(frame["cache_hit"].mean()) if n else math.nan,
        "llm_share": float((frame["route"] == "llm").mean()) if n else math.nan,
        "llm_calls": int((frame["tokens"] > 0).sum()) if n else 0,
        "tokens": tokens,
        "est_cost_usd": tokens / 1000.0 * price_per_1k_tokens,
        "degraded": int(frame["degraded"].sum()) if n else 0,
        "fallback": int(frame["fallback"].sum()) if n else 0,
        "errors": int((frame["error"] != "").sum()) if n else 0,
        "feedback_mean": float(ratings.mean()) if len(ratings) else math.nan,
        "feedback_n": int(len(ratings)),
    }


def source_hits(frame: pd.DataFrame) -> pd.DataFrame:
    """How many logged requests cited each knowledge-base answer."""
    counts: dict[str, int] = {}
    for sources in frame.get("sources", []):
        for answer_id in {str(s["answer_id"]) for s in (sources or []) if isinstance(s, dict) and s.get("answer_id")}:
            counts[answer_id] = counts.get(answer_id, 0) + 1
    return (pd.DataFrame(sorted(counts.items(), key=lambda kv: -kv[1]), columns=["answer_id", "hits"]))


def knowledge_gaps(frame: pd.DataFrame, kb_top_below: float) -> pd.DataFrame:
    """Requests the knowledge base could not serve: no sources, or escalated with a weak best match."""
    if frame.empty:
        return frame.loc[:, ["created_at", "text", "route", "kb_top"]]
    no_sources = frame["sources"].map(lambda s: not s)
    weak = frame["kb_top"].fillna(0.0) < kb_top_below
    escalated = frame["route"].isin(["llm"])
    mask = frame["route"].isin([SMALL_ROUTE, LLM_ROUTE]) & ((no_sources & weak) | (escalated & weak))
    return frame.loc[mask, ["created_at", "text", "route", "kb_top"]].sort_values("kb_top")


def check_summary(frame: pd.DataFrame) -> tuple[dict[str, int], pd.DataFrame]:
    """How many LLM answers the answer check looked at and changed, and the findings by kind and action."""
    if frame.empty or "checked" not in frame:
        return {"checked": 0, "changed": 0}, pd.DataFrame(columns=["kind", "action", "findings"])
    checked = frame[frame["checked"]]
    rows = [(f["kind"], f["action"]) for findings in checked["findings"] for f in findings if isinstance(f, dict)]
    table = (pd.DataFrame(rows, columns=["kind", "action"]).value_counts().rename("findings").reset_index()
             if rows else pd.DataFrame(columns=["kind", "action", "findings"]))
    return {"checked": int(len(checked)), "changed": int(sum(bool(f) for f in checked["findings"]))}, table


def rewrite_rejections(frame: pd.DataFrame) -> tuple[dict[str, int], pd.DataFrame]:
    """How many LLM rewrites were verified, how many were rejected (the draft served instead), and the rejections by
    reason (the part of the reason before its colon: echo, dropped, contradiction, adds nothing but words ...)."""
    empty = pd.DataFrame(columns=["reason", "rejections", "share of rewrites"])
    if frame.empty or "rewritten" not in frame:
        return {"rewrites": 0, "rejected": 0}, empty
    rewrites = frame[frame["rewritten"]]
    reasons = [f.get("value") or "unknown" for findings in rewrites["findings"] for f in findings
               if isinstance(f, dict) and f.get("kind") == "rewrite_rejected"]
    counts = {"rewrites": int(len(rewrites)), "rejected": len(reasons)}
    if not reasons:
        return counts, empty
    table = pd.Series(reasons).value_counts().rename_axis("reason").rename("rejections").reset_index()
    table["share of rewrites"] = (table["rejections"] / max(1, counts["rewrites"])).round(3)
    return counts, table


def _offered(trace: list) -> list[str]:
    return next((list(s.get("detail", {}).get("options") or []) for s in trace
                 if isinstance(s, dict) and s.get("stage") == "suggest" and s.get("decision") == "offered"), [])


def _suggest_step(trace: Any, *decisions: str) -> bool:
    """The request's trace has a ``suggest`` step with one of ``decisions`` (a suggestion clicked, a number typed)."""
    return any(isinstance(s, dict) and s.get("stage") == "suggest" and s.get("decision") in decisions for s in trace)


def which_one_questions(frame: pd.DataFrame) -> dict[str, int]:
    """The small tier's question "which one?" (served ``clarify``, chains/tiers/small.py): how often it was asked, how
    many were followed by another message in the same session, and how many of those picked a choice (a click, or its
    number typed back)."""
    out = {"asked": 0, "followed": 0, "picked": 0}
    if frame.empty or "served" not in frame:
        return out
    rows = frame.sort_values("created_at")
    waiting: set[str] = set()
    for session_id, trace, served in zip(rows["session_id"], rows["trace"], rows["served"]):
        if session_id in waiting:
            waiting.discard(session_id)
            out["followed"] += 1
            out["picked"] += _suggest_step(trace, "clicked", "number typed")
        if served == CLARIFY_SERVED:
            out["asked"] += 1
            waiting.add(session_id)
    return out


def suggestion_clicks(frame: pd.DataFrame) -> dict[str, float]:
    """Suggested replies (predicted follow-ups, chains/followups.py): answers that offered some, how many of them the
    customer's next message clicked, and how often the next message, clicked or typed, was served one of the
    offered answers (the prediction's live hit rate, over next messages in the same session)."""
    out: dict[str, float] = {"offered": 0, "clicked": 0, "followed": 0, "hits": 0}
    if frame.empty or "trace" not in frame:
        return out
    rows = frame.sort_values("created_at")
    last_offer: dict[str, list[str]] = {}
    for session_id, trace, route, served, sources in zip(rows["session_id"], rows["trace"], rows["route"],
                                                          rows["served"], rows["sources"]):
        offered = last_offer.pop(session_id, None)
        if offered is not None:
            out["followed"] += 1
            clicked = _suggest_step(trace, "clicked")
            out["clicked"] += clicked
            out["hits"] += clicked or state_of(route, served, sources) in offered
        if now := _offered(trace):
            out["offered"] += 1
            last_offer[session_id] = now
    return out
