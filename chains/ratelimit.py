"""Per-user and per-session rate limit: a sliding one-minute window, in memory, per app process."""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from typing import Callable


class RateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self._clock = clock
        self._events: dict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def check(self, *keys: str) -> str:
        """Record one message for every non-empty key; returns a customer-facing refusal, or "" to go on."""
        if self.per_minute <= 0:
            return ""
        now = self._clock()
        keys = tuple(k for k in keys if k)
        with self._lock:
            for key in keys:
                window = self._events[key]
                while window and now - window[0] > 60.0:
                    window.popleft()
                if len(window) >= self.per_minute:
                    wait = 60.0 - (now - window[0])
                    return (f"You are sending messages faster than we can answer ({self.per_minute} per minute). "
                            f"Please wait {max(1, round(wait))} seconds and try again.")
            for key in keys:
                self._events[key].append(now)
        return ""
