"""Realistic customer traffic for the ops tests, on a simulated clock.

Live minutes go through the REAL service (real KB, real vLLM behind a fault-injecting proxy) with the service's
clock set to simulated time. Hours of history are built from those real rows: each simulated minute draws a
Poisson number of logged requests (with their real routes, scores and latencies) and stamps them into that minute,
which is what an unremarkable day looks like to the detector without answering 30,000 messages on 2 cores.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import insert, select

from storage.db import Database
from storage.tables import Feedback, RequestLog, new_id, table_of
from tests.conftest import DATA, DEMO

START = datetime(2026, 11, 2, 6, 0, tzinfo=UTC)
PHRASINGS = ("{q}", "hi, {q}", "{q} thanks", "quick question - {q}", "{q}? please help", "hello! {q}",
             "{q}, asap", "sorry to bother you, {q}")


class SimClock:
    """The service's clock in these tests: simulated time that only moves when the test says so."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def at_minute(self, minute: int, second: float = 0.0) -> datetime:
        self.now = START + timedelta(minutes=minute, seconds=second)
        return self.now


def minute_end(minute: int) -> datetime:
    """When the job that sees minute ``minute`` complete runs."""
    return START + timedelta(minutes=minute + 1)


@dataclass
class Messages:
    """Questions of the demo KB (new phrasings, and common ones customers repeat) and out-of-scope messages."""

    rng: np.random.Generator
    common: list[str] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)
    out_of_scope: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, seed: int = 7) -> Messages:
        rng = np.random.default_rng(seed)
        with (DEMO / "questions.csv").open(encoding="utf-8") as handle:
            questions = [row["query"] for row in csv.DictReader(handle)]
        with (DATA / "clinc150" / "valid.csv").open(encoding="utf-8") as handle:
            oos = [row["query"] for row in csv.DictReader(handle) if row["in_scope"] != "True"]
        order = rng.permutation(len(questions))
        common = [questions[i] for i in order[:40]]
        fresh = [PHRASINGS[rng.integers(len(PHRASINGS))].format(q=questions[i].rstrip("?").lower())
                 for i in order[40:]]
        return cls(rng, common, fresh, [oos[i] for i in rng.permutation(len(oos))])

    def minute(self, n: int, oos_share: float = 0.15, repeat_share: float = 0.4,
               repeats: Iterator[str] | None = None) -> list[str]:
        """``n`` messages: repeats of common questions, new phrasings of KB questions, out-of-scope ones, in exactly
        the shares given, shuffled. Exact, not drawn one by one: a live minute the tests call ordinary must be
        ordinary by construction (a draw of 11 out-of-scope messages in 30 is a real 3-spread rise, and the detector
        rightly alerted on it). History's minute-to-minute variety comes from sampling it (clone_history)."""
        n_oos, n_repeat = round(n * oos_share), round(n * repeat_share)
        kinds = ["oos"] * n_oos + ["repeat"] * n_repeat + ["fresh"] * (n - n_oos - n_repeat)
        self.rng.shuffle(kinds)
        out = []
        for kind in kinds:
            if kind == "oos":
                out.append(self.out_of_scope[self.rng.integers(len(self.out_of_scope))])
            elif kind == "repeat":
                out.append(next(repeats) if repeats is not None else self.common[self.rng.integers(len(self.common))])
            else:
                out.append(self.fresh[self.rng.integers(len(self.fresh))])
        return out


def serve_minute(runtime, clock: SimClock, minute: int, messages: list[str]) -> list:
    """Answer ``messages`` through the real service, spread over simulated minute ``minute``."""
    from chains.schema import ChatRequest

    responses = []
    for index, message in enumerate(messages):
        clock.at_minute(minute, 60.0 * index / max(1, len(messages)))
        responses.append(runtime.service.answer(ChatRequest(message=message, user_id=f"cust{index % 23}",
                                                            session_id=f"sim-{minute}-{index}", channel="api")))
    return responses


def logged_rows(db: Database) -> list[dict]:
    table = table_of(RequestLog)
    with db.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table))]


def with_total_ms(row: dict, ms: float) -> dict:
    """``row`` with its request's total latency set to ``ms`` (both the column and the per-stage record say it)."""
    return {**row, "total_ms": ms, "latency_ms": {**(row.get("latency_ms") or {}), "total": ms}}


def clone_history(db: Database, pool: list[dict], first_minute: int, minutes: int, per_minute: float,
                  seed: int = 11, negative_feedback: float = 0.0, latency_jitter: float = 0.0) -> int:
    """Fill ``minutes`` simulated minutes from ``first_minute`` on with real logged rows drawn from ``pool``.

    ``latency_jitter``: each copy's latency is scaled by exp(N(0, jitter)). A pool is a few warm-up minutes, so its
    copies repeat a few dozen latencies thousands of times; three real hours of a host drift from hour to hour and
    answer at other lengths. Without it, the detector learns that the pool's slowest request is the slowest there
    ever is, and an ordinary live minute with a few longer answers reads as a slowdown."""
    rng = np.random.default_rng(seed)
    rows, ratings = [], []
    for minute in range(first_minute, first_minute + minutes):
        for _ in range(rng.poisson(per_minute)):
            source = pool[rng.integers(len(pool))]
            row = {**source, "id": new_id(),
                   "created_at": START + timedelta(minutes=minute, seconds=float(rng.uniform(0, 59.9)))}
            if latency_jitter:
                row = with_total_ms(row, float(source["total_ms"]) * float(np.exp(rng.normal(0.0, latency_jitter))))
            rows.append(row)
            if negative_feedback and rng.random() < negative_feedback:
                ratings.append({"request_id": row["id"], "rating": -1, "comment": "", "user_id": "",
                                "created_at": row["created_at"]})
    with db.engine.begin() as conn:
        for start in range(0, len(rows), 2000):
            conn.execute(insert(table_of(RequestLog)), rows[start:start + 2000])
        if ratings:
            conn.execute(insert(table_of(Feedback)), ratings)
    return len(rows)
