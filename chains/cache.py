"""Response cache: exact, then semantic (encoder cosine), with a time-to-live, stored in :mod:`chains.state`.

Entries are keyed by knowledge-base and policy version, so an edited KB never serves a stale answer. Two
rules keep it safe: a negation guard (``cancel my order`` never matches ``I do not want to cancel my order``),
and personal data is never cached: a message or answer carrying an order number, email or phone is neither
stored nor served, so one customer's answer cannot reach another.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from chains.features import negation_signature
from chains.state import CacheEntry, SharedState
from core.pii import find_pii

_NON_WORD = re.compile(r"[^\w\u3400-\u9fff]+", re.UNICODE)


def normalise(text: str) -> str:
    return _NON_WORD.sub(" ", text.lower()).strip()


@dataclass(frozen=True)
class CacheHit:
    payload: dict[str, Any]
    similarity: float
    kind: str            # "exact" | "semantic"
    source_text: str


class ResponseCache:
    def __init__(self, state: SharedState, ttl_s: float, clock: Callable[[], float] = time.time,
                 shop_addresses: tuple[str, ...] = ()):
        """``shop_addresses``: the shop's own contact details (TANDEM_SUPPORT_EMAIL), which an answer may carry
        without being personal: the help center's answers and the offer of a person name them."""
        self.state = state
        self.ttl_s = ttl_s
        self._clock = clock
        self.shop_addresses = tuple(a for a in shop_addresses if a)

    def __len__(self) -> int:
        return self.state.cache_size()

    @staticmethod
    def cacheable(text: str, answer: str = "") -> tuple[bool, str]:
        kinds = find_pii(text) + find_pii(answer)
        if kinds:
            return False, f"personal data ({', '.join(sorted(set(kinds)))}) is never cached"
        return True, ""

    def lookup_exact(self, text: str, namespace: str) -> CacheHit | None:
        """Same words (case and punctuation aside): needs no embedding, so it runs before one is made."""
        if not self.cacheable(text)[0]:
            return None
        entry = self.state.cache_get(namespace, normalise(text))
        return CacheHit(entry.payload, 1.0, "exact", entry.text or entry.key) if entry is not None else None

    def lookup(self, text: str, vector: np.ndarray, namespace: str, threshold: float) -> CacheHit | None:
        exact = self.lookup_exact(text, namespace)
        if exact is not None or not self.cacheable(text)[0]:
            return exact
        view = self.state.cache_vectors(namespace)
        if not view.entries:
            return None
        negations = negation_signature(text)
        sims = view.matrix @ np.asarray(vector, dtype=np.float32)
        for index in np.argsort(-sims)[:5]:
            similarity = float(sims[index])
            if similarity < threshold:
                break
            entry = view.entries[index]
            if entry.negations == negations:
                return CacheHit(entry.payload, similarity, "semantic", entry.text or entry.key)
        return None

    def store(self, text: str, vector: np.ndarray, namespace: str, payload: dict[str, Any]) -> bool:
        answer = str(payload.get("answer", ""))
        for address in self.shop_addresses:
            answer = answer.replace(address, "")
        ok, _ = self.cacheable(text, answer)
        if not ok:
            return False
        return self.state.cache_put(CacheEntry(namespace=namespace, key=normalise(text),
                                               vector=np.asarray(vector, dtype=np.float32),
                                               negations=negation_signature(text), payload=payload,
                                               expires_at=self._clock() + self.ttl_s, text=text))

    def forget(self, text: str, namespace: str) -> bool:
        """Drop the answer stored for ``text`` in ``namespace`` (an operator deleted a prepared answer)."""
        return self.state.cache_delete(namespace, normalise(text))

    def clear(self) -> None:
        self.state.cache_clear()
