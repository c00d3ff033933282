"""Response cache: exact, then semantic (MiniLM cosine), with a time-to-live.

Entries are keyed by knowledge-base version, so an edited KB never serves a stale answer. Two rules
keep it safe: a negation guard (``cancel my order`` never matches ``I do not want to cancel my order``),
and personal data is never cached: a message or answer carrying an order number, email or phone is
neither stored nor served, so one customer's answer cannot reach another.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chains.features import negation_signature
from chains.pii import find_pii

_NON_WORD = re.compile(r"[^\w\u3400-\u9fff]+", re.UNICODE)


def normalise(text: str) -> str:
    return _NON_WORD.sub(" ", text.lower()).strip()


@dataclass
class CacheEntry:
    key: str
    vector: np.ndarray
    kb_version: str
    negations: frozenset[str]
    payload: dict[str, Any]
    created: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class CacheHit:
    payload: dict[str, Any]
    similarity: float
    kind: str            # "exact" | "semantic"
    source_text: str


class ResponseCache:
    def __init__(self, ttl_s: float, max_entries: int = 5000):
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: list[CacheEntry] = []
        self._exact: dict[tuple[str, str], CacheEntry] = {}
        self._matrix = np.zeros((0, 384), dtype=np.float32)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def cacheable(text: str, answer: str = "") -> tuple[bool, str]:
        kinds = find_pii(text) + find_pii(answer)
        if kinds:
            return False, f"personal data ({', '.join(sorted(set(kinds)))}) is never cached"
        return True, ""

    def lookup_exact(self, text: str, kb_version: str) -> CacheHit | None:
        """Same words (case and punctuation aside): needs no embedding, so it runs before one is made."""
        if not self.cacheable(text)[0]:
            return None
        with self._lock:
            self._expire(time.monotonic())
            exact = self._exact.get((kb_version, normalise(text)))
        return CacheHit(exact.payload, 1.0, "exact", exact.key) if exact is not None else None

    def lookup(self, text: str, vector: np.ndarray, kb_version: str, threshold: float) -> CacheHit | None:
        exact = self.lookup_exact(text, kb_version)
        if exact is not None or not self.cacheable(text)[0]:
            return exact
        negations = negation_signature(text)
        with self._lock:
            if not self._entries:
                return None
            sims = self._matrix @ vector
            for index in np.argsort(-sims)[:5]:
                similarity = float(sims[index])
                if similarity < threshold:
                    break
                entry = self._entries[index]
                if entry.kb_version == kb_version and entry.negations == negations:
                    return CacheHit(entry.payload, similarity, "semantic", entry.key)
        return None

    def store(self, text: str, vector: np.ndarray, kb_version: str, payload: dict[str, Any]) -> bool:
        ok, _ = self.cacheable(text, payload.get("answer", ""))
        if not ok:
            return False
        entry = CacheEntry(normalise(text), np.asarray(vector, dtype=np.float32), kb_version,
                           negation_signature(text), payload)
        with self._lock:
            if (kb_version, entry.key) in self._exact:
                return False
            if len(self._entries) >= self.max_entries:
                self._drop(0)
            self._entries.append(entry)
            self._exact[(kb_version, entry.key)] = entry
            self._matrix = np.vstack([self._matrix, entry.vector[None, :]])
        return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._exact.clear()
            self._matrix = np.zeros((0, 384), dtype=np.float32)

    def _expire(self, now: float) -> None:
        while self._entries and now - self._entries[0].created > self.ttl_s:
            self._drop(0)

    def _drop(self, index: int) -> None:
        entry = self._entries.pop(index)
        self._exact.pop((entry.kb_version, entry.key), None)
        self._matrix = np.delete(self._matrix, index, axis=0)
