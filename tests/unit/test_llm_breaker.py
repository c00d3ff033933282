"""Circuit breaker state transitions, driven by an injected clock (no sleeps)."""

from __future__ import annotations

from chains.llm.breaker import BreakerState, CircuitBreaker


class ManualClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make(failures=3, window_s=30.0, cooldown_s=10.0):
    clock = ManualClock()
    changes: list[BreakerState] = []
    return CircuitBreaker(failures, window_s, cooldown_s, clock=clock, on_change=changes.append), clock, changes


def test_opens_after_n_failures_within_the_window_and_rejects_while_open():
    breaker, clock, changes = make()
    for _ in range(2):
        breaker.record_failure()
        assert breaker.allow()
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    assert changes == [BreakerState.OPEN]
    assert not breaker.allow()
    clock.advance(9.9)
    assert not breaker.allow()
    assert 0 < breaker.retry_after_s() <= 0.1 + 1e-9


def test_failures_spread_beyond_the_window_do_not_open():
    breaker, clock, _ = make(failures=3, window_s=30.0)
    for _ in range(5):
        breaker.record_failure()
        clock.advance(16.0)  # at most two failures inside any 30 s window
    assert breaker.state is BreakerState.CLOSED


def test_success_resets_the_failure_count():
    breaker, _, _ = make(failures=2)
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED


def test_after_cooldown_exactly_one_probe_passes_and_its_success_closes():
    breaker, clock, changes = make(failures=1)
    breaker.record_failure()
    clock.advance(10.0)
    assert breaker.allow()  # the probe
    assert breaker.state is BreakerState.HALF_OPEN
    assert not breaker.allow()  # a second caller while the probe runs
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.allow() and breaker.allow()
    assert changes == [BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.CLOSED]


def test_failed_probe_reopens_for_a_full_new_cooldown():
    breaker, clock, _ = make(failures=1, cooldown_s=10.0)
    breaker.record_failure()
    clock.advance(10.0)
    assert breaker.allow()
    clock.advance(2.0)
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    clock.advance(9.0)
    assert not breaker.allow()
    clock.advance(1.0)
    assert breaker.allow()


def test_late_failures_while_open_do_not_extend_the_cooldown():
    breaker, clock, _ = make(failures=1, cooldown_s=10.0)
    breaker.record_failure()
    clock.advance(8.0)
    breaker.record_failure()  # a call that started before the breaker opened
    clock.advance(2.0)
    assert breaker.allow()


def test_a_probe_that_never_reports_expires_after_a_cooldown():
    breaker, clock, _ = make(failures=1, cooldown_s=10.0)
    breaker.record_failure()
    clock.advance(10.0)
    assert breaker.allow()
    clock.advance(5.0)
    assert not breaker.allow()
    clock.advance(5.0)
    assert breaker.allow()  # the lost probe no longer blocks recovery


def test_gauge_encoding():
    assert [s.gauge_value for s in (BreakerState.CLOSED, BreakerState.HALF_OPEN, BreakerState.OPEN)] == [0, 1, 2]
