"""State that every app replica must agree on: response-cache entries and rate-limit counters.

:class:`SharedState` is the contract; :class:`MemoryState` keeps it in this process (one machine, the
default); a Redis implementation lets several replicas share it. The cache's rules (what may be cached,
which hit counts) and the limiter's policy live in :mod:`chains.cache` and :mod:`chains.ratelimit`; this
layer only stores.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class CacheEntry:
    namespace: str          # what the answer is valid for: "<kb version>:<policy version>"
    key: str                # the normalised message text (exact hits)
    vector: np.ndarray      # the message's embedding (semantic hits)
    negations: frozenset[str]
    payload: dict[str, Any]
    expires_at: float       # wall-clock seconds (time.time), so replicas agree
    text: str = ""          # the message as asked, for the trace


@dataclass
class Vectors:
    """The semantic-lookup view of one namespace: a matrix whose rows belong to ``entries``."""

    matrix: np.ndarray
    entries: list[CacheEntry] = field(default_factory=list)


class SharedState(ABC):
    """Cache entries and sliding-window counters; implementations must be safe across threads."""

    name: str = "shared state"

    # --- rate limits --------------------------------------------------------------------------------
    @abstractmethod
    def hit(self, keys: Sequence[str], limit: int, window_s: float) -> float:
        """Count one event for every key unless one of them already has ``limit`` events in the last ``window_s``.

        Returns 0.0 when counted, else the seconds until the oldest event of the full key leaves the window.
        """

    # --- cache ----------------------------------------------------------------------------------------
    @abstractmethod
    def cache_get(self, namespace: str, key: str) -> CacheEntry | None:
        """The live entry stored under exactly this key, or None."""

    @abstractmethod
    def cache_put(self, entry: CacheEntry) -> bool:
        """Store an entry; False when that namespace already holds the key."""

    @abstractmethod
    def cache_delete(self, namespace: str, key: str) -> bool:
        """Drop the entry stored under exactly this key; False when there was none."""

    @abstractmethod
    def cache_vectors(self, namespace: str) -> Vectors:
        """Every live entry of the namespace with its vectors, for nearest-neighbour lookups."""

    @abstractmethod
    def cache_size(self) -> int:
        """Live entries over all namespaces."""

    @abstractmethod
    def cache_clear(self) -> None:
        """Drop every entry."""

    def status(self) -> dict[str, Any]:
        return {"backend": self.name, "cache_entries": self.cache_size()}


class MemoryState(SharedState):
    """Everything in this process: right for one app process, wrong for several (each would keep its own)."""

    name = "memory"

    def __init__(self, max_entries: int = 5000, clock: Callable[[], float] = time.time):
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, deque[float]] = {}
        self._entries: OrderedDict[tuple[str, str], CacheEntry] = OrderedDict()
        self._vectors: dict[str, Vectors] = {}

    def hit(self, keys: Sequence[str], limit: int, window_s: float) -> float:
        now = self._clock()
        with self._lock:
            windows = [self._windows.setdefault(key, deque()) for key in keys]
            for window in windows:
                while window and now - window[0] > window_s:
                    window.popleft()
                if len(window) >= limit:
                    return max(0.0, window_s - (now - window[0]))
            for window in windows:
                window.append(now)
        return 0.0

    def cache_get(self, namespace: str, key: str) -> CacheEntry | None:
        with self._lock:
            self._expire()
            return self._entries.get((namespace, key))

    def cache_put(self, entry: CacheEntry) -> bool:
        with self._lock:
            self._expire()
            if (entry.namespace, entry.key) in self._entries:
                return False
            while len(self._entries) >= self.max_entries:
                self._drop(next(iter(self._entries)))
            self._entries[(entry.namespace, entry.key)] = entry
            view = self._vectors.get(entry.namespace)
            row = np.asarray(entry.vector, dtype=np.float32)[None, :]
            if view is None:
                self._vectors[entry.namespace] = Vectors(row, [entry])
            else:
                view.matrix = np.vstack([view.matrix, row])
                view.entries.append(entry)
            return True

    def cache_delete(self, namespace: str, key: str) -> bool:
        with self._lock:
            if (namespace, key) not in self._entries:
                return False
            self._drop((namespace, key))
            return True

    def cache_vectors(self, namespace: str) -> Vectors:
        with self._lock:
            self._expire()
            view = self._vectors.get(namespace)
            return Vectors(view.matrix, list(view.entries)) if view is not None else Vectors(np.zeros((0, 0), np.float32))

    def cache_size(self) -> int:
        with self._lock:
            self._expire()
            return len(self._entries)

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._vectors.clear()

    def _expire(self) -> None:
        # Entries are kept in insertion order and share one TTL, so the oldest expire first.
        now = self._clock()
        while self._entries:
            first = next(iter(self._entries))
            if self._entries[first].expires_at > now:
                break
            self._drop(first)

    def _drop(self, index: tuple[str, str]) -> None:
        entry = self._entries.pop(index)
        view = self._vectors.get(entry.namespace)
        if view is None:
            return
        position = next((i for i, e in enumerate(view.entries) if e is entry), None)
        if position is not None:
            view.entries.pop(position)
            view.matrix = np.delete(view.matrix, position, axis=0)
        if not view.entries:
            del self._vectors[entry.namespace]
