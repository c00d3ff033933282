"""The alert detector on simulated per-minute counts: false alerts a day on steady traffic, and how soon a step is
caught (`python -m bench.detector_sim`; the README's detector figures come from it).

Rates: each minute has Poisson(30) requests and a binomial count of events at a steady base rate; the detector's
own spread and surprise functions (ops/detector.py) score it against a three-hour history, as `evaluate` does.
Latencies: each minute has Poisson(12) small-tier requests, a lognormal body (median 30 ms) plus a share of slow
outliers at 100-400 ms (what a 2-core host shows: a GC pause, a neighbour's burst), scored by the detector's
`latency_surprises`, and for comparison by the Gaussian z of the minute's p95 that it replaced. The LLM route:
Poisson(4) requests a minute with a narrow body around 1.3 s; a uniform 15 % drift should not alert, a real
slowdown should.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ops.detector import H, K, latency_surprises, series_spread, surprise

PER_MINUTE = 30
HISTORY = 180


def alerts_opened(surprises: Iterable[float]) -> int:
    """Alerts the CUSUM opens over a run of minutes' z (one stays open until the score falls back to 0)."""
    alerts, score, open_ = 0, 0.0, False
    for z in surprises:
        score = max(0.0, score + z - K)
        if score >= H and not open_:
            alerts, open_ = alerts + 1, True
        open_ = open_ and score > 0
    return alerts


def first_alert_minute(surprises: Iterable[float]) -> int:
    """The minute (from 1) at which the CUSUM first reaches h; 99 if it never does. Stops reading there."""
    score = 0.0
    for minute, z in enumerate(surprises, start=1):
        score = max(0.0, score + z - K)
        if score >= H:
            return minute
    return 99


def caught_shares(delays: list[int]) -> tuple[float, float]:
    """Share of trials caught within 2 and within 3 minutes."""
    caught = np.asarray(delays)
    return float(np.mean(caught <= 2)), float(np.mean(caught <= 3))


def false_alerts_per_day(rate: float, days: int, rng: np.random.Generator) -> float:
    minutes = days * 1440 + HISTORY + 10
    sizes = rng.poisson(PER_MINUTE, minutes)
    values = rng.binomial(sizes, rate) / np.maximum(sizes, 1)

    def surprises() -> Iterator[float]:
        for t in range(HISTORY + 10, minutes):
            if t % 10 == 0 or t == HISTORY + 10:  # the baseline moves with the history window, as in evaluate()
                past, weights = pd.Series(values[t - 10 - HISTORY:t - 10]), sizes[t - 10 - HISTORY:t - 10]
                baseline = float((past * weights).sum() / max(weights.sum(), 1))
                spread = series_spread(past, "rate", float(np.median(weights)), center=baseline)
            yield surprise(values[t], sizes[t], baseline, spread, "rate", 1)

    return alerts_opened(surprises()) / days


def caught_within(rate: float, spreads: float, rng: np.random.Generator, trials: int = 300) -> tuple[float, float]:
    """Share of steps of ``spreads`` counting-noise spreads caught within 2 and within 3 minutes."""
    spread = math.sqrt(max(rate, 0.02) * (1 - max(rate, 0.02)) / PER_MINUTE)
    stepped = min(0.99, rate + spreads * spread)

    def surprises() -> Iterator[float]:  # drawn minute by minute, only until the alert
        for _ in range(29):
            size = rng.poisson(PER_MINUTE)
            yield surprise(rng.binomial(size, stepped) / max(size, 1), size, rate, max(spread, 0.01), "rate", 1)

    return caught_shares([first_alert_minute(surprises()) for _ in range(trials)])


@dataclass(frozen=True)
class Route:
    """One route's simulated requests: Poisson(per_minute) a minute, a lognormal body around median_ms."""
    name: str
    per_minute: int
    median_ms: float
    sigma: float


# The small tier: a wide body around 30 ms, plus the slow outliers a busy 2-core host adds.
SMALL = Route("small-tier", 12, 30.0, 0.45)
# The LLM at Tandem's usual share (about 4 of 30 requests a minute): a narrow body around 1.3 s, because an answer's
# length is capped, which is what a CI run's vLLM logged.
LLM = Route("LLM", 4, 1300.0, 0.12)
SMALL_PER_MINUTE = SMALL.per_minute


def latency_minutes(count: int, slow_share: float, rng: np.random.Generator, factor: float = 1.0,
                    route: Route = SMALL, add_ms: float = 0.0) -> pd.Series:
    """``count`` minutes of request latencies (an array a minute, as minute_series keeps them)."""
    minutes = []
    for size in np.maximum(rng.poisson(route.per_minute, count), 1):
        body = rng.lognormal(math.log(route.median_ms), route.sigma, size) * factor + add_ms
        minutes.append(np.where(rng.random(size) < slow_share, rng.uniform(100.0, 400.0, size), body))
    return pd.Series(minutes)


def p95_gaussian_z(minute: np.ndarray, past: pd.Series) -> float:
    """The detector before 2026-12-02: the minute's p95 against the history's median and robust spread."""
    p95s = past.apply(lambda ms: float(np.quantile(ms, 0.95)))
    spread = series_spread(p95s, "latency", SMALL_PER_MINUTE)
    return (float(np.quantile(minute, 0.95)) - float(p95s.median())) / spread


def false_latency_alerts_per_day(slow_share: float, days: int, rng: np.random.Generator,
                                 old: bool = False, route: Route = SMALL) -> float:
    minutes = latency_minutes(days * 1440 + HISTORY + 10, slow_share, rng, route=route)

    def surprises() -> Iterator[float]:
        block: dict = {}
        for t in range(HISTORY + 10, len(minutes)):
            if t % 10 == 0 or t == HISTORY + 10:  # evaluate() scores ten recent minutes against one history
                past, recent = minutes.iloc[t - 10 - HISTORY:t - 10], minutes.iloc[t:t + 10]
                block = ({i: p95_gaussian_z(ms, past) for i, ms in recent.items()} if old
                         else latency_surprises(past, recent, route.per_minute))
            yield block[t]

    return alerts_opened(surprises()) / days


def slowdown_caught_within(slow_share: float, rng: np.random.Generator, factor: float = 1.0, more_slow: float = 0.0,
                           trials: int = 200, route: Route = SMALL, add_ms: float = 0.0,
                           minutes: int = 3) -> tuple[float, float]:
    """Share of slowdowns caught within 2 and within 3 minutes: every ordinary request ``factor`` times slower
    (or ``add_ms`` slower), or ``more_slow`` more of the requests slow outliers (the tail alone getting worse).
    With ``minutes`` = 10 the second share is "within 10 minutes", for drifts that should not alert at all."""
    delays = []
    for _ in range(trials):
        past = latency_minutes(HISTORY, slow_share, rng, route=route)
        recent = latency_minutes(minutes, slow_share + more_slow, rng, factor, route=route, add_ms=add_ms)
        delays.append(first_alert_minute(latency_surprises(past, recent, route.per_minute).values()))
    two, _ = caught_shares(delays)
    return two, float(np.mean(np.asarray(delays) <= minutes))


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=200, help="simulated days per base rate (false alerts are rare: "
                                                               "20 days cannot tell 0.01 a day from none)")
    parser.add_argument("--latency-days", type=int, default=20, help="simulated days per share of slow requests")
    args = parser.parse_args(argv)
    days = args.days
    rng = np.random.default_rng(7)
    print(f"k={K}, h={H}, {PER_MINUTE} requests a minute; {days} simulated days per base rate")
    print("base rate | false alerts a day | 3-spread step caught <= 2 min / <= 3 min | 4-spread <= 2 min")
    for rate in (0.0, 0.02, 0.05, 0.125, 0.3, 0.45):
        two, three = caught_within(rate, 3.0, rng)
        four, _ = caught_within(rate, 4.0, rng)
        print(f"{rate:9.3f} | {false_alerts_per_day(rate, days, rng):18.3f} | {two:19.0%} / {three:.0%} | {four:.0%}",
              flush=True)
    print(f"\nsmall-tier latency, {SMALL_PER_MINUTE} requests a minute; {args.latency_days} simulated days per share "
          "of slow outliers")
    print("slow share | false alerts a day (p95 Gaussian z before) | 2x slowdown caught <= 2 / <= 3 min | "
          "20 % more outliers <= 2 / <= 3 min")
    for share in (0.0, 0.01, 0.02, 0.04):
        now = false_latency_alerts_per_day(share, args.latency_days, rng)
        before = false_latency_alerts_per_day(share, max(1, args.latency_days // 10), rng, old=True)
        two, three = slowdown_caught_within(share, rng, factor=2.0)
        tail_two, tail_three = slowdown_caught_within(share, rng, more_slow=0.2)
        print(f"{share:10.2f} | {now:8.3f} ({before:.1f}) {'':26}| {two:19.0%} / {three:.0%} | "
              f"{tail_two:19.0%} / {tail_three:.0%}", flush=True)
    print(f"\nLLM latency, {LLM.per_minute} requests a minute around {LLM.median_ms:.0f} ms; {args.latency_days} "
          "simulated days")
    print("false alerts a day | all 15 % slower: alert within 10 min (should not) | 1.5x caught <= 2 / <= 3 min | "
          "+3 s caught <= 2 / <= 3 min")
    steady = false_latency_alerts_per_day(0.0, args.latency_days, rng, route=LLM)
    _, drift = slowdown_caught_within(0.0, rng, factor=1.15, route=LLM, minutes=10)
    half_two, half_three = slowdown_caught_within(0.0, rng, factor=1.5, route=LLM)
    add_two, add_three = slowdown_caught_within(0.0, rng, add_ms=3000.0, route=LLM)
    print(f"{steady:18.3f} | {drift:49.0%} | {half_two:22.0%} / {half_three:.0%} | {add_two:19.0%} / {add_three:.0%}",
          flush=True)


if __name__ == "__main__":
    main()
