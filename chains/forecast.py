"""Waiting costs no time, by prediction (issue 57): when the chain's own records say the next LLM answer will fail its
checks, a message whose failed answer would end as the offer of a person gets that offer at once.

The records are the request log: the latest LLM answers of the past day (route llm, the answer plan, neither
cancelled, fallen back nor degraded) and whether each was replaced for failing its checks (served
``draft_with_caveat``, ``human_offer`` or ``handoff`` instead of ``llm``). A message answered by prediction has no
answer of its own to count, so the LLM's answer written for the operator in the background (chains/background.py) is
recorded on its row (``scores.background_served``) and counts like any other: once the model answers well again, the
rate falls under the threshold and customers wait for the LLM again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlmodel import col

from chains import answers
from chains.schema import HANDOFF_ROUTE, LLM_ROUTE
from chains.turn import Turn
from storage.db import Database
from storage.tables import RequestLog, utcnow

# What an LLM answer ended as: passed ("llm"), or replaced for failing its checks (the rest).
ANSWER_SERVED = ("llm", "draft_with_caveat", "human_offer", "handoff")
LLM_ANSWER_REASON = "tier: llm answer"  # the LLM tier's reason for an answer (a rewrite's differs)
# The scores a predicted turn's row carries: the rate and its sample, and, once written, what the background answer
# ended as.
RATE, SAMPLE, BACKGROUND_SERVED = "predicted_failure_rate", "predicted_failure_sample", "background_served"
HORIZON = timedelta(days=1)  # older answers say little about the model serving now
SCAN = 500  # request rows read at most per prediction (rewrites and predicted rows without an outcome are passed over)


@dataclass(frozen=True)
class Outlook:
    """How the latest LLM answers ended: ``failed`` of ``counted`` were replaced for failing their checks."""

    failed: int
    counted: int

    @property
    def rate(self) -> float:
        return self.failed / self.counted if self.counted else 0.0

    def says(self) -> str:
        return f"{self.failed} of the last {self.counted} LLM answers failed their checks (rate {self.rate:.2f})"


class FailureForecast:
    """Predicts from the request log whether the next LLM answer will fail its checks: at least ``sample`` answers
    counted, and a share of ``rate`` or more of them failed. Only for messages from ``channels`` (where a customer
    waits and a person can be handed the conversation)."""

    def __init__(self, db: Database, sample: int, rate: float, channels: tuple[str, ...],
                 clock: Callable[[], datetime] = utcnow):
        self.db, self.sample, self.rate, self.channels, self.clock = db, sample, rate, channels, clock

    def outlook(self) -> Outlook:
        """The latest ``sample`` LLM answers of the past day, and how many of them failed."""
        since = self.clock() - HORIZON
        with self.db.session() as session:
            columns = (RequestLog.route, RequestLog.served, RequestLog.reasons, RequestLog.scores,
                       RequestLog.cancelled, RequestLog.fallback, RequestLog.degraded)
            rows = session.execute(select(*(col(c) for c in columns))
                                   .where(col(RequestLog.created_at) >= since,
                                          col(RequestLog.route).in_([LLM_ROUTE, HANDOFF_ROUTE]))
                                   .order_by(col(RequestLog.created_at).desc()).limit(SCAN)).all()
        failed: list[bool] = []
        for route, served, reasons, scores, cancelled, fallback, degraded in rows:
            if route == LLM_ROUTE and not (cancelled or fallback or degraded) and served in ANSWER_SERVED \
                    and LLM_ANSWER_REASON in (reasons or []):
                failed.append(served != "llm")
            elif route == HANDOFF_ROUTE and (scores or {}).get(BACKGROUND_SERVED) in ANSWER_SERVED:
                failed.append(scores[BACKGROUND_SERVED] != "llm")
            if len(failed) == self.sample:
                break
        return Outlook(sum(failed), len(failed))

    def failing(self) -> Outlook | None:
        """The outlook when it predicts a failure, else None (too few answers, or too few of them failed)."""
        outlook = self.outlook()
        return outlook if outlook.counted >= self.sample and outlook.rate >= self.rate else None

    def claim(self, turn: Turn, draft_fits: Callable[[Turn], bool], brand: answers.Brand) -> bool:
        """Settle an LLM-planned turn with the offer of a person when its answer is predicted to fail and a failed
        answer would end as that offer (the KB draft does not fit the message, else the draft with a caveat would be
        served). The caller's own choice of the LLM (``mode``), a clicked suggestion and other channels are left
        alone. Whether it settled the turn."""
        request = turn.request
        if (turn.done or turn.plan != LLM_ROUTE or request.mode != "routed" or request.names_answer
                or request.channel not in self.channels or draft_fits(turn)):
            return False
        outlook = self.failing()
        if outlook is None:
            return False
        turn.scores.update({RATE: round(outlook.rate, 4), SAMPLE: outlook.counted})
        turn.served = "human_offer"
        turn.note("forecast", "predicted failure: the offer of a person at once", failed=outlook.failed,
                  counted=outlook.counted, rate=round(outlook.rate, 4))
        turn.finish(HANDOFF_ROUTE, answers.notices_for(brand)[turn.language].no_answer,
                    f"predicted failure: {outlook.says()}; the offer of a person at once, the LLM's answer is "
                    "written in the background for the operator")
        return True

    def record(self, request_id: str, served: str) -> bool:
        """What the background answer of a predicted turn ended as, on that turn's row (the next outlook counts
        it). Whether the row was found."""
        with self.db.session() as session:
            row = session.get(RequestLog, request_id)
            if row is None:
                return False
            row.scores = {**(row.scores or {}), BACKGROUND_SERVED: served}
            session.add(row)
            session.commit()
        return True


def predicted_reason(scores: dict[str, float]) -> str:
    """The handoff's reason for a predicted turn ("" for any other)."""
    if RATE not in scores:
        return ""
    sample = int(scores.get(SAMPLE, 0))
    return (f"the LLM's answer is predicted to fail its checks: {round(scores[RATE] * sample)} of the last {sample} "
            f"LLM answers failed theirs (rate {scores[RATE]:.2f})")
