"""Retention: message text older than ``TANDEM_RETENTION_DAYS`` is purged (the ops job runs it; `tandem ops purge`).

What goes, in rows older than the cutoff:
- ``requests``: ``text``, ``answer`` and ``rejected_text`` are blanked; the ``trace`` keeps only each stage's name and
  time (the console's "rewritten"/"checked" counts read the stage names), its decisions and details go; each finding
  keeps its ``kind`` and ``action`` and loses its ``value``; a non-empty ``error`` becomes ``[purged]`` (the error rate
  counts non-empty errors). Routes, scores, reasons (masked, and read by the detector), latencies, tokens, sources
  and the row itself stay, so statistics, the detector and the tuner read old traffic as before.
- ``messages`` (conversation memory): the rows are deleted. A blanked message would still be read as history and
  feed an empty turn to the prompt; an old conversation needs no memory.
- ``feedback.comment`` and ``handoff.note`` are blanked; the rating, the ticket and its status stay.

Rows already purged are not selected again (the filters below look for text that is still there), so a pass every
minute costs one indexed query when there is nothing to do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import String, cast, delete, or_, select, update

from storage.db import Database
from storage.tables import ChatMessage, Feedback, Handoff, RequestLog, table_of, utcnow

PURGED_ERROR = "[purged]"
BATCH = 500  # request rows rewritten per transaction


@dataclass
class PurgeReport:
    cutoff: datetime
    requests: int = 0
    messages: int = 0
    feedback: int = 0
    handoffs: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cutoff": self.cutoff.isoformat()}

    def summary(self) -> str:
        return (f"purged text older than {self.cutoff:%Y-%m-%d %H:%M} UTC: {self.requests} requests, "
                f"{self.messages} conversation messages deleted, {self.feedback} feedback comments, "
                f"{self.handoffs} handoff notes")


def purge(db: Database, days: float, now: datetime | None = None) -> PurgeReport:
    """Purge message text older than ``days`` days before ``now``; ``days`` <= 0 purges nothing."""
    now = _aware(now or utcnow())
    report = PurgeReport(cutoff=now - timedelta(days=days))
    if days <= 0:
        return report
    cutoff = report.cutoff
    requests = table_of(RequestLog)
    while True:
        with db.engine.begin() as conn:
            rows = conn.execute(
                select(requests.c.id, requests.c.error, requests.c.trace, requests.c.findings)
                .where(requests.c.created_at < cutoff)
                .where(or_(requests.c.text != "", requests.c.answer != "", requests.c.rejected_text != "",
                           requests.c.error.notin_(["", PURGED_ERROR]),
                           cast(requests.c.trace, String).like('%"detail"%'),
                           cast(requests.c.findings, String).like('%"value"%')))
                .limit(BATCH)).all()
            for row in rows:
                conn.execute(update(requests).where(requests.c.id == row.id).values(
                    text="", answer="", rejected_text="", error=PURGED_ERROR if row.error else "",
                    trace=_trace_skeleton(row.trace), findings=_findings_without_values(row.findings)))
        report.requests += len(rows)
        if len(rows) < BATCH:
            break
    with db.engine.begin() as conn:
        messages, feedback, handoffs = table_of(ChatMessage), table_of(Feedback), table_of(Handoff)
        report.messages = conn.execute(delete(messages).where(messages.c.created_at < cutoff)).rowcount
        report.feedback = conn.execute(update(feedback).where(feedback.c.created_at < cutoff)
                                       .where(feedback.c.comment != "").values(comment="")).rowcount
        report.handoffs = conn.execute(update(handoffs).where(handoffs.c.created_at < cutoff)
                                       .where(handoffs.c.note != "").values(note="")).rowcount
    return report


def _trace_skeleton(trace: Any) -> list[dict[str, Any]]:
    return [{"stage": step.get("stage", ""), "ms": step.get("ms", 0.0)} for step in trace or []
            if isinstance(step, dict)]


def _findings_without_values(findings: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in finding.items() if k in ("kind", "action")} for finding in findings or []
            if isinstance(finding, dict)]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
