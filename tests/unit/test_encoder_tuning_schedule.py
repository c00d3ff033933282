"""The tuner's learning-rate schedule: warm-up, then linear decay, never above the configured rate."""

import pytest

from offline.encoder_tuning import warmup_then_linear_decay


@pytest.mark.parametrize("total", [1, 7, 12, 47, 189])
def test_the_rate_rises_to_the_configured_rate_and_never_overshoots(total):
    factors = [warmup_then_linear_decay(step, total, warmup=10) for step in range(total)]
    assert max(factors) == 1.0 and all(0.0 < f <= 1.0 for f in factors)  # small KBs once peaked at 1.6-2.1x
    peak = factors.index(1.0)
    assert factors[:peak + 1] == sorted(factors[:peak + 1]) and factors[peak:] == sorted(factors[peak:], reverse=True)
