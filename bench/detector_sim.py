"""The alert detector on simulated per-minute counts: false alerts a day on steady traffic, and how soon a step is
caught (`python -m bench.detector_sim`; the README's detector figures come from it).

Each minute has Poisson(30) requests and a binomial count of events at a steady base rate; the detector's own
spread and surprise functions (ops/detector.py) score it against a three-hour history, as `evaluate` does.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ops.detector import H, K, series_spread, surprise

PER_MINUTE = 30
HISTORY = 180


def false_alerts_per_day(rate: float, days: int, rng: np.random.Generator) -> float:
    minutes = days * 1440 + HISTORY + 10
    sizes = rng.poisson(PER_MINUTE, minutes)
    values = rng.binomial(sizes, rate) / np.maximum(sizes, 1)
    alerts, score, open_ = 0, 0.0, False
    for t in range(HISTORY + 10, minutes):
        if t % 10 == 0 or t == HISTORY + 10:  # the baseline moves with the history window, as in evaluate()
            past, weights = pd.Series(values[t - 10 - HISTORY:t - 10]), sizes[t - 10 - HISTORY:t - 10]
            baseline = float((past * weights).sum() / max(weights.sum(), 1))
            spread = series_spread(past, "rate", float(np.median(weights)), center=baseline)
        score = max(0.0, score + surprise(values[t], sizes[t], baseline, spread, "rate", 1) - K)
        if score >= H and not open_:
            alerts, open_ = alerts + 1, True
        open_ = open_ and score > 0
    return alerts / days


def caught_within(rate: float, spreads: float, rng: np.random.Generator, trials: int = 300) -> tuple[float, float]:
    """Share of steps of ``spreads`` counting-noise spreads caught within 2 and within 3 minutes."""
    spread = math.sqrt(max(rate, 0.02) * (1 - max(rate, 0.02)) / PER_MINUTE)
    stepped = min(0.99, rate + spreads * spread)
    delays = []
    for _ in range(trials):
        score, delay = 0.0, 99
        for minute in range(1, 30):
            size = rng.poisson(PER_MINUTE)
            value = rng.binomial(size, stepped) / max(size, 1)
            score = max(0.0, score + surprise(value, size, rate, max(spread, 0.01), "rate", 1) - K)
            if score >= H:
                delay = minute
                break
        delays.append(delay)
    caught = np.asarray(delays)
    return float(np.mean(caught <= 2)), float(np.mean(caught <= 3))


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=200, help="simulated days per base rate (false alerts are rare: "
                                                               "20 days cannot tell 0.01 a day from none)")
    days = parser.parse_args(argv).days
    rng = np.random.default_rng(7)
    print(f"k={K}, h={H}, {PER_MINUTE} requests a minute; {days} simulated days per base rate")
    print("base rate | false alerts a day | 3-spread step caught <= 2 min / <= 3 min | 4-spread <= 2 min")
    for rate in (0.0, 0.02, 0.05, 0.125, 0.3, 0.45):
        two, three = caught_within(rate, 3.0, rng)
        four, _ = caught_within(rate, 4.0, rng)
        print(f"{rate:9.3f} | {false_alerts_per_day(rate, days, rng):18.3f} | {two:19.0%} / {three:.0%} | {four:.0%}",
              flush=True)


if __name__ == "__main__":
    main()
