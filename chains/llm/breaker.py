"""A thread-safe circuit breaker: stop calling a failing LLM endpoint, then probe it once to recover.

States: ``closed`` (calls pass), ``open`` (calls are rejected at once, so users get the small tier's
answer instead of waiting for timeouts), ``half_open`` (after the cooldown exactly one probe call is let
through; its success closes the breaker, its failure opens it again for another cooldown).
The clock is injectable so state transitions are tested without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"

    @property
    def gauge_value(self) -> int:
        """Prometheus encoding: 0 closed, 1 half-open, 2 open."""
        return {"closed": 0, "half_open": 1, "open": 2}[self.value]


class CircuitBreaker:
    def __init__(self, failures: int, window_s: float, cooldown_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[BreakerState], None] | None = None):
        if failures < 1:
            raise ValueError("failures must be at least 1")
        self.failures = failures
        self.window_s = window_s
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._on_change = on_change
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._failure_times: deque[float] = deque()
        self._opened_at = 0.0
        self._probe_started_at: float | None = None

    @property
    def state(self) -> BreakerState:
        with self._lock:
            return self._state

    def allow(self) -> bool:
        """May a call go out now? While half-open only the single probe gets True."""
        with self._lock:
            now = self._clock()
            if self._state is BreakerState.CLOSED:
                return True
            if self._state is BreakerState.OPEN:
                if now - self._opened_at < self.cooldown_s:
                    return False
                self._set(BreakerState.HALF_OPEN)
                self._probe_started_at = now
                return True
            # Half-open: one probe at a time. A probe whose caller vanished without reporting
            # (thread killed, bug) must not wedge the breaker, so it expires after a cooldown.
            if self._probe_started_at is not None and now - self._probe_started_at < self.cooldown_s:
                return False
            self._probe_started_at = now
            return True

    def record_success(self) -> None:
        with self._lock:
            self._failure_times.clear()
            self._probe_started_at = None
            if self._state is not BreakerState.CLOSED:
                self._set(BreakerState.CLOSED)

    def record_failure(self) -> None:
        with self._lock:
            now = self._clock()
            if self._state is BreakerState.HALF_OPEN:
                self._open(now)
                return
            if self._state is BreakerState.OPEN:
                return  # a late failure of a call that started before opening does not extend the cooldown
            self._failure_times.append(now)
            while self._failure_times and now - self._failure_times[0] > self.window_s:
                self._failure_times.popleft()
            if len(self._failure_times) >= self.failures:
                self._open(now)

    def retry_after_s(self) -> float:
        """Seconds until a probe will be allowed (0 when calls pass now)."""
        with self._lock:
            if self._state is not BreakerState.OPEN:
                return 0.0
            return max(0.0, self.cooldown_s - (self._clock() - self._opened_at))

    def snapshot(self) -> dict:
        with self._lock:
            return {"state": self._state.value, "recent_failures": len(self._failure_times),
                    "failures_to_open": self.failures, "cooldown_s": self.cooldown_s}

    def _open(self, now: float) -> None:
        self._opened_at = now
        self._probe_started_at = None
        self._failure_times.clear()
        self._set(BreakerState.OPEN)

    def _set(self, state: BreakerState) -> None:
        self._state = state
        if self._on_change is not None:
            self._on_change(state)
