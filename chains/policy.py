"""The live routing policy of this process: the newest saved version, re-read every couple of seconds.

Every message reads ``policy.current()``; the console (another process) saves a new version, and within
``refresh_s`` every app process routes by it. A database that cannot be read keeps the last known policy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from core.policy import Thresholds
from storage import policy_store
from storage.db import Database

REFRESH_S = 2.0


class LivePolicy:
    def __init__(self, db: Database, fallback: Thresholds, refresh_s: float = REFRESH_S,
                 clock: Callable[[], float] = time.monotonic):
        """``fallback``: the policy until the database is first read (the settings' defaults)."""
        self.db, self.fallback = db, fallback
        self.refresh_s = refresh_s
        self._clock = clock
        self._value: Thresholds | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def current(self) -> Thresholds:
        now = self._clock()
        with self._lock:
            if self._value is None or now - self._read_at > self.refresh_s:
                try:
                    self._value = policy_store.current(self.db)
                except Exception:  # a locked or unreachable database must not stop answers
                    self._value = self._value or self.fallback
                self._read_at = now
            return self._value

    def invalidate(self) -> None:
        with self._lock:
            self._value = None

    def save(self, values: dict, author: str, reason: str) -> Thresholds:
        saved = policy_store.save(self.db, values, author, reason)
        self.invalidate()
        return saved


class FixedPolicy:
    """A policy that never changes (batch routing, evaluation, tests of one setting)."""

    def __init__(self, thresholds: Thresholds):
        self.value = thresholds

    def current(self) -> Thresholds:
        return self.value
