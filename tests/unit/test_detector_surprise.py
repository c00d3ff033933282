"""The alert detector's per-minute surprise: counts of rare events are read from the binomial tail, not as
Gaussian outliers; real drops and rises still score high."""

import math

import pandas as pd

from ops.detector import series_spread, surprise


def test_two_rare_events_in_a_minute_are_not_an_outlier():
    spread = series_spread(pd.Series([0.0] * 170 + [1 / 30] * 10), "rate", 30, center=0.02)
    gaussian = (2 / 30 - 0.02) / spread
    assert gaussian > 1.8  # what the old z made of it: over 1.5 (k), so the CUSUM climbed minute after minute
    assert surprise(2 / 30, 30, 0.02, spread, "rate", 1) < 1.5


def test_a_real_rise_and_a_real_drop_score_high():
    spread = math.sqrt(0.1 * 0.9 / 30)
    assert surprise(12 / 30, 30, 0.1, spread, "rate", 1) > 3.0  # fallbacks 10 % -> 40 %: alert within 2 minutes
    assert surprise(0.0, 30, 0.4, spread, "rate", -1) > 4.5  # cache hits 40 % -> 0 ("down"): alert in 1 minute


def test_latencies_keep_the_gaussian_z():
    assert surprise(300.0, 20, 100.0, 50.0, "latency", 1) == 4.0
