"""Per-minute series of the request log and a detector that learns each series' usual level from its own history.

Detector: for every series, the baseline is the history's level over the previous ``history_min`` minutes (the
median of a latency; the pooled rate of a rate, since the median minute of a rare event is 0) and the spread a
robust one (1.4826 x the median absolute deviation), never below what counting noise alone gives for a rate
(sqrt(p(1-p)/n)) or 5 % of a latency (and 25 ms). Each new minute becomes a z-score (for a rate, also read from
the exact binomial tail, see :func:`surprise`), and a one-sided CUSUM adds them up: S = max(0, S + z - k); an alert
opens when S >= h. k = 1.5, h = 3.0; `python -m bench.detector_sim` measures them on simulated counts (30 requests
a minute, 200 days per base rate from 0 to 0.45): 0-0.05 false alerts a day per rate series on steady traffic
(about one every 5-10 days over all of them); a step of 3 counting-noise spreads is caught within 2 minutes
15-55 % of the time and within 3 minutes 32-78 % (rarer events slower), a 4-spread step within 2 minutes
36-94 %. k = 1.0 catches a 3-spread step within 2 minutes 33-72 % of the time but raises 0.3-0.55 false alerts a
day per rate series, about 3 a day over the eight, past the one-a-day budget. (The Gaussian z alone, used before,
paged 3-13 times a day on a rate whose base is 2 %.)
A latency series shows each minute's p95, but is scored as a rate: the share of the minute's requests that are
slower than 90 % of the history's requests by more than 25 ms and 25 %, against that share over the history (see
:func:`latency_surprises`). Scoring the p95 itself against a robust spread paged about 40-75 times a simulated day when
1-4 % of requests are slow outliers, and a real CI run opened 32 alerts in its simulated day that way.
A series with less than ``min_history_min`` minutes of data says it is still learning instead of alerting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from chains.tiers.base import CACHE_ROUTE, LLM_ROUTE, SMALL_ROUTE

# series -> (which way is bad, kind): rates get a counting-noise floor, latencies a relative one.
SERIES: dict[str, tuple[str, str]] = {
    "llm_share": ("up", "rate"), "fallback_rate": ("up", "rate"), "degrade_rate": ("up", "rate"),
    "p95_ms_small": ("up", "latency"), "p95_ms_llm": ("up", "latency"), "p95_ms_cache": ("up", "latency"),
    "cache_hit_rate": ("down", "rate"), "oos_share": ("up", "rate"), "negative_feedback_rate": ("up", "rate"),
    "guard_rate": ("up", "rate"), "error_rate": ("up", "rate"),
}
K, H = 1.5, 3.0
RESOLVE_MINUTES = 3  # an alert resolves after this many calm minutes in a row


@dataclass(frozen=True)
class DetectorParams:
    history_min: int = 180
    min_history_min: int = 60
    recent_min: int = 10
    k: float = K
    h: float = H


@dataclass
class SeriesState:
    name: str
    direction: str
    status: str                 # learning | ok | alert
    value: float = math.nan     # the latest minute
    baseline: float = math.nan
    spread: float = math.nan
    score: float = 0.0          # the CUSUM
    minutes: int = 0            # minutes of history the baseline used
    calm_minutes: int = 0       # trailing minutes back within the usual range
    detail: dict = field(default_factory=dict)


def minute_series(frame: pd.DataFrame, feedback: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per minute with a column per series (NaN where a minute had nothing to measure)."""
    if frame.empty:
        return pd.DataFrame(columns=["requests", "routed", *SERIES], index=pd.DatetimeIndex([], tz="UTC"))
    rows = frame.assign(minute=frame["created_at"].dt.floor("1min"))
    routed = rows[rows["route"] != "guard"]
    by = rows.groupby("minute")
    out = pd.DataFrame({"requests": by.size()})
    routed_by = routed.groupby("minute")
    n_routed = routed_by.size()
    out["routed"] = n_routed
    for name, column in (("fallback_rate", "fallback"), ("degrade_rate", "degraded"), ("cache_hit_rate", "cache_hit")):
        out[name] = routed_by[column].mean()
    out["llm_share"] = routed_by["route"].apply(lambda r: float((r == "llm").mean()))
    escalated = routed["reasons"].apply(lambda reasons: any(str(r).startswith("llm: p_llm") for r in reasons))
    out["oos_share"] = escalated.groupby(routed["minute"]).mean()
    out["guard_rate"] = by["route"].apply(lambda r: float((r == "guard").mean()))
    out["error_rate"] = by["error"].apply(lambda e: float((e.astype(str).str.len() > 0).mean()))
    for route in (SMALL_ROUTE, LLM_ROUTE, CACHE_ROUTE):
        part = rows[rows["route"] == route].groupby("minute")["total_ms"]
        out[f"p95_ms_{route}"] = part.quantile(0.95)
        out[f"n_{route}"] = part.size()
        out[f"ms_{route}"] = part.apply(lambda ms: ms.to_numpy(dtype=float))  # for latency_surprises
    if feedback is not None and not feedback.empty:
        minute = pd.to_datetime(feedback["created_at"], utc=True).dt.floor("1min")
        negative = (feedback["rating"] < 0).groupby(minute).sum()
        out["negative_feedback_rate"] = (negative / out["routed"]).clip(upper=1.0)
        out.loc[out["negative_feedback_rate"].isna() & out["routed"].notna(), "negative_feedback_rate"] = 0.0
    else:
        out["negative_feedback_rate"] = 0.0
    return out.sort_index()


LATENCY_FLOOR_MS = 25.0
# ... and by more than this share of it. A uniform drift of 10-20 % is what a real engine shows from one hour to the
# next (load on the host, answer lengths, a warmer prefix cache): a CI run's LLM calls drifted from about 1.32 s to
# 1.51 s, all of them at once, and the 5 % margin used before paged for it. An operator cannot act on that; a
# quarter slower is where a slowdown starts to matter (see bench.detector_sim's LLM rows).
LATENCY_MARGIN = 0.25
# A request is slow above this quantile of the history's requests (plus the floor). 0.9, measured by
# bench.detector_sim: 0.95 missed broad slowdowns when a few % of requests are outliers (a 2x slowdown caught
# within 2 minutes 15 % of the time at 2 % outliers), 0.75 missed slowdowns of the tail alone; 0.9 is between.
SLOW_QUANTILE = 0.9


# The requests each series' minute value is measured over (latencies: that route's; guard and error rates: all).
COUNT_OF = {"p95_ms_small": "n_small", "p95_ms_llm": "n_llm", "p95_ms_cache": "n_cache", "guard_rate": "requests",
            "error_rate": "requests"}


def series_spread(history: pd.Series, kind: str, typical_n: float, center: float | None = None) -> float:
    values = history.to_numpy(dtype=float)
    median = float(np.median(values))
    mad = 1.4826 * float(np.median(np.abs(values - median)))
    if kind == "rate":
        p = min(max(median if center is None else center, 0.02), 0.98)
        return max(mad, math.sqrt(p * (1 - p) / max(typical_n, 1.0)), 0.01)
    # A latency spread is at least 5 % of the usual value and 25 ms, and at least the sampling noise of a p95 taken
    # over the few requests a route sees in a minute (about half the value over sqrt(n)). A quiet route's p95 is
    # nearly its maximum, so one slow request (a GC pause, a neighbour's burst on a 2-core host) can double it for
    # a minute: a small-tier p95 going from 40 to 86 ms, or a cache hit from 12 to 30 ms, is noise to an operator,
    # not a page. A sustained rise of that size still alerts, after a few minutes instead of one.
    return max(mad, 0.05 * abs(median), 0.5 * abs(median) / math.sqrt(max(typical_n, 1.0)), LATENCY_FLOOR_MS)


def surprise(value: float, n: float, baseline: float, spread: float, kind: str, sign: int) -> float:
    """How many spreads ``value`` lies beyond the baseline in the bad direction (a z-score for the CUSUM).

    A rate of a few events in a minute is a count, and counts of rare events are skewed: at a 2 % base rate, 2 of
    30 is already 2.6 counting-noise spreads, and a Gaussian z paged several times a day on steady traffic. So a
    rate's z is also read from the exact binomial tail (mid-p, at the history's pooled rate), and the smaller of
    the two counts: the tail handles small counts, the history's own spread handles traffic burstier than a
    binomial. Latencies are scored by :func:`latency_surprises`, which counts slow requests and calls this.
    """
    gaussian = (value - baseline) / spread * sign
    if kind != "rate" or not n or n != n or n <= 0:
        return gaussian
    # scipy.special's binomial CDF and normal quantile: the ufuncs behind scipy.stats' binom and norm, without
    # their per-call argument checks, which were half of the ops job's time
    from scipy.special import bdtr, ndtri

    count, size, p = round(value * n), round(n), min(max(baseline, 1e-4), 1 - 1e-4)

    def at_most(k: int) -> float:
        return float(bdtr(k, size, p)) if k >= 0 else 0.0

    below = 0.5 * (at_most(count - 1) + at_most(count))  # mid-p: P(X < k) + P(X = k) / 2
    tail = float(ndtri(min(max(below, 1e-12), 1 - 1e-12))) * sign
    return min(gaussian, tail)


def latency_surprises(past: pd.Series, recent: pd.Series, typical_n: float) -> dict[Any, float]:
    """Each recent minute's z for a route's latency: the share of its requests slower than usual, scored as a rate.

    ``past`` and ``recent`` hold each minute's request latencies. A request is slow when it exceeds the history's
    pooled ``SLOW_QUANTILE`` by more than 25 ms and 25 % (``LATENCY_MARGIN``): smaller rises are noise to an operator.
    Why not the p95 itself: over the dozen requests a route sees in a minute the p95 is nearly the slowest one, so a
    single slow request (a GC pause, a neighbour's burst on the same cores) doubles it, and the robust spread, blind
    to a heavy tail by design, read that as a 4-6 spread outlier. The share of slow requests is a count, so the
    binomial tail in :func:`surprise` takes one or two of them in a minute calmly, and a real slowdown makes many
    requests slow. Latency series are all "up" series: only slower is bad.
    """
    pooled = np.concatenate(list(past))
    usual_high = float(np.quantile(pooled, SLOW_QUANTILE))
    limit = usual_high + max(LATENCY_FLOOR_MS, LATENCY_MARGIN * abs(usual_high))
    # (slow + 1) / (n + 2): a history without one slow request still has a small, non-zero usual share
    usual = (float((pooled > limit).sum()) + 1.0) / (len(pooled) + 2.0)
    shares = pd.Series([float((ms > limit).mean()) for ms in past], index=past.index)
    spread = series_spread(shares, "rate", typical_n, center=usual)
    return {minute: surprise(float((ms > limit).mean()), len(ms), usual, spread, "rate", 1)
            for minute, ms in recent.items()}


def evaluate(series: pd.DataFrame, now: datetime, params: DetectorParams | None = None) -> list[SeriesState]:
    """The state of every series at ``now`` (the minute that just ended is the newest point)."""
    params = params or DetectorParams()
    end = pd.Timestamp(now).floor("1min")
    recent_start = end - timedelta(minutes=params.recent_min)
    history = series[(series.index >= recent_start - timedelta(minutes=params.history_min))
                     & (series.index < recent_start)]
    recent = series[(series.index >= recent_start) & (series.index < end)]
    states = []
    for name, (direction, kind) in SERIES.items():
        past = history[name].dropna() if name in history else pd.Series(dtype=float)
        count_column = COUNT_OF.get(name, "routed")
        if len(past) < params.min_history_min:
            states.append(SeriesState(name, direction, "learning", minutes=int(len(past)),
                                      detail={"needs_minutes": params.min_history_min}))
            continue
        counts = history[count_column].reindex(past.index).fillna(0.0) if count_column in history else None
        baseline = float(np.median(past))
        if kind == "rate" and counts is not None and counts.sum() > 0:
            baseline = float((past * counts).sum() / counts.sum())  # the pooled rate: a median of rare events is 0
        typical_n = float(history[count_column].median()) if count_column in history else 1.0
        spread = series_spread(past, kind, typical_n, center=baseline if kind == "rate" else None)
        score, calm, last = 0.0, 0, math.nan
        values = recent[name].dropna() if name in recent else pd.Series(dtype=float)
        sizes = recent[count_column].reindex(values.index) if count_column in recent else None
        requests = f"ms_{name.removeprefix('p95_ms_')}"
        slow = (latency_surprises(history[requests].reindex(past.index), recent[requests].reindex(values.index),
                                  typical_n) if kind == "latency" and len(values) else {})
        for minute, value in values.items():
            n = float(sizes[minute]) if sizes is not None else math.nan
            z = slow[minute] if kind == "latency" else surprise(float(value), n, baseline, spread, kind,
                                                                1 if direction == "up" else -1)
            score = max(0.0, score + z - params.k)
            calm = calm + 1 if z < 1.0 else 0
            last = value
        status = "alert" if score >= params.h else "ok"
        states.append(SeriesState(name, direction, status, value=last, baseline=baseline, spread=spread,
                                  score=round(score, 2), minutes=int(len(past)), calm_minutes=calm))
    return states
