"""The alert detector's per-minute surprise: counts of rare events are read from the binomial tail, not as
Gaussian outliers, and so are a route's slow requests; real drops, rises and slowdowns still score high."""

import math

import numpy as np
import pandas as pd

from ops.detector import latency_surprises, series_spread, surprise


def test_two_rare_events_in_a_minute_are_not_an_outlier():
    spread = series_spread(pd.Series([0.0] * 170 + [1 / 30] * 10), "rate", 30, center=0.02)
    gaussian = (2 / 30 - 0.02) / spread
    assert gaussian > 1.8  # what the old z made of it: over 1.5 (k), so the CUSUM climbed minute after minute
    assert surprise(2 / 30, 30, 0.02, spread, "rate", 1) < 1.5


def test_a_real_rise_and_a_real_drop_score_high():
    spread = math.sqrt(0.1 * 0.9 / 30)
    assert surprise(12 / 30, 30, 0.1, spread, "rate", 1) > 3.0  # fallbacks 10 % -> 40 %: alert within 2 minutes
    assert surprise(0.0, 30, 0.4, spread, "rate", -1) > 4.5  # cache hits 40 % -> 0 ("down"): alert in 1 minute


def history_with_slow_outliers(rng: np.random.Generator, minutes: int = 180) -> pd.Series:
    """Minutes of a dozen requests around 30 ms, where 2 % of requests are slow outliers at 100-400 ms."""
    return pd.Series([np.sort(np.where(rng.random(12) < 0.02, rng.uniform(100, 400, 12),
                                       rng.lognormal(np.log(30), 0.45, 12))) for _ in range(minutes)])


def test_one_slow_request_in_a_minute_is_not_a_latency_outlier():
    rng = np.random.default_rng(5)
    past = history_with_slow_outliers(rng)
    minute = np.sort(np.append(rng.lognormal(np.log(30), 0.45, 11), 380.0))
    p95s = past.apply(lambda ms: float(np.quantile(ms, 0.95)))
    gaussian = (np.quantile(minute, 0.95) - p95s.median()) / series_spread(p95s, "latency", 12)
    assert gaussian > 4.5  # what scoring the p95 itself made of it: an alert in one minute
    assert latency_surprises(past, pd.Series([minute]), 12)[0] < 1.5  # under k: the CUSUM does not climb


def test_a_slowdown_of_most_requests_scores_high_and_a_rise_under_the_floor_does_not():
    rng = np.random.default_rng(6)
    past = history_with_slow_outliers(rng)
    slowed = pd.Series([np.sort(rng.lognormal(np.log(30), 0.45, 12)) * factor for factor in (3.0, 1.2)])
    z = latency_surprises(past, slowed, 12)
    assert z[0] > 4.5  # every request three times slower: an alert in one minute
    assert z[1] < 1.5  # 20 % slower is a few ms: under the 25 ms floor, not a page


def test_a_uniform_15_percent_drift_of_llm_calls_is_not_a_latency_outlier_and_half_again_slower_is():
    """LLM calls have a narrow body (answer lengths are capped), so a drift moves every call at once: a CI run's
    went from about 1.32 s to 1.51 s between two phases of one test and, at a 5 % margin, paged."""
    rng = np.random.default_rng(8)
    past = pd.Series([rng.lognormal(np.log(1300), 0.12, 4) for _ in range(180)])
    drifted = np.full(4, 1.15) * np.quantile(np.concatenate(list(past)), 0.9)  # all four over the usual p90
    slower = rng.lognormal(np.log(1300), 0.12, 4) * 1.5
    z = latency_surprises(past, pd.Series([drifted, slower]), 4)
    assert z[0] < 1.5  # under k: the CUSUM does not climb
    assert z[1] > 3.0  # an alert within one or two minutes
