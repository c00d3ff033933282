"""Rate limits a caller cannot dodge, and the LLM's token budget, on the maintained ``limits`` library.

Messages are counted per client address, per API key, per signed customer and in total, in a sliding one-minute
window (a counter that weighs the previous minute's count by how much of it is left: near a minute's boundary one
message more may pass; a moving window would be exact, but its memory storage keeps an empty list for every caller
ever seen). Every key is one the caller cannot choose: the address is the connection's (or a trusted proxy's
X-Forwarded-For), the key and the customer are verified. The unsigned ``user_id`` and the session id are not keys,
so changing them gains nothing, and nobody can lock a customer out by claiming to be them.

The counters live in Redis when TANDEM_REDIS_URL is set (so replicas enforce one limit together), else in this
process. Both expire a key with its window, so a million callers do not leave a million counters. When Redis
fails, counting goes on in this process rather than letting everything through.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage, Storage, storage_from_string
from limits.strategies import SlidingWindowCounterRateLimiter

log = logging.getLogger("tandem.ratelimit")

WINDOW_S = 60


@dataclass(frozen=True)
class LimitKeys:
    """Who is calling, as far as limits go. Empty parts are not counted."""

    address: str = ""
    key_id: str = ""
    customer: str = ""

    @property
    def client(self) -> str:
        """The anonymous caller that owns an LLM budget: the API key, or the address."""
        return f"key:{self.key_id}" if self.key_id else (f"addr:{self.address}" if self.address else "")


class RateLimiter:
    def __init__(self, *, per_address: int, per_key: int, per_customer: int, total: int, llm_tokens: int,
                 storage_uri: str = "memory://", window_s: int = WINDOW_S):
        self.window_s = window_s
        self.items: dict[str, RateLimitItem | None] = {
            name: RateLimitItemPerSecond(amount, window_s) if amount > 0 else None
            for name, amount in (("addr", per_address), ("key", per_key), ("customer", per_customer),
                                 ("total", total), ("llm_tokens", llm_tokens))}
        self.storage_uri = storage_uri
        self._storage: Storage = _open(storage_uri)
        self._strategy = SlidingWindowCounterRateLimiter(self._storage)
        self._fallback: SlidingWindowCounterRateLimiter | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings) -> RateLimiter:
        return cls(per_address=settings.rate_limit_per_min, per_key=settings.rate_limit_key_per_min,
                   per_customer=settings.rate_limit_per_min, total=settings.rate_limit_total_per_min,
                   llm_tokens=settings.llm_tokens_per_min,
                   storage_uri=settings.redis_url or "memory://")

    # --- messages ---------------------------------------------------------------------------------------
    def check(self, keys: LimitKeys) -> str:
        """Count one message against every limit that applies; a customer-facing refusal, or "" to go on.

        All limits are tested before any is counted, so a refused message costs the caller nothing.
        """
        counted = [(self.items[name], name, value) for name, value in
                   (("addr", keys.address), ("key", keys.key_id), ("customer", keys.customer), ("total", "all"))
                   if value and self.items[name] is not None]
        with self._lock:  # test-then-hit as one step in this process (Redis: near enough, off by a few at most)
            for item, name, value in counted:
                assert item is not None
                if not self._call("test", item, name, value):
                    return self._refusal(item, name, value)
            for item, name, value in counted:
                assert item is not None
                self._call("hit", item, name, value)
        return ""

    def _refusal(self, item: RateLimitItem, name: str, value: str) -> str:
        try:
            reset = self._active().get_window_stats(item, name, value).reset_time
            wait = max(1, round(reset - time.time()))
        except Exception:
            wait = self.window_s
        whose = "from everyone together" if name == "total" else "from you"
        return (f"We are receiving more messages {whose} than we can answer ({item.amount} per "
                f"{self.window_s} seconds). Please wait {wait} seconds and try again.")

    # --- the LLM budget ---------------------------------------------------------------------------------
    def spend_llm_tokens(self, client: str, tokens: int) -> bool:
        """Take ``tokens`` from the client's budget for this minute; False (nothing taken) when it would overrun."""
        item = self.items["llm_tokens"]
        if item is None or not client or tokens <= 0:
            return True
        if tokens > item.amount:
            return False
        return bool(self._call("hit", item, "llm_tokens", client, cost=tokens))

    # --- storage --------------------------------------------------------------------------------------
    def _active(self) -> SlidingWindowCounterRateLimiter:
        return self._fallback or self._strategy

    def _call(self, method: str, item: RateLimitItem, *identifiers: str, cost: int = 1) -> bool:
        try:
            return bool(getattr(self._active(), method)(item, *identifiers, cost=cost))
        except Exception as exc:  # Redis down: count here instead of letting every message through
            if self._fallback is not None:
                raise
            log.warning("rate-limit storage failed (%s); counting in this process", exc.__class__.__name__)
            self._fallback = SlidingWindowCounterRateLimiter(MemoryStorage())
            return bool(getattr(self._fallback, method)(item, *identifiers, cost=cost))

    def key_count(self) -> int:
        """Counters held now (memory storage only; for the bounded-memory test and /healthz)."""
        storage = self._storage if self._fallback is None else None
        if isinstance(storage, MemoryStorage):
            return len(storage.storage) + len(storage.events)
        return -1

    def status(self) -> dict[str, object]:
        from core.pii import host_of

        return {"backend": "redis" if self.storage_uri.startswith("redis") else "memory",
                "storage": host_of(self.storage_uri) if self.storage_uri.startswith("redis") else "memory",
                "fallback": self._fallback is not None}


def retry_after_s(refusal: str) -> int:
    """The wait a refusal names ("Please wait 12 seconds"), for the Retry-After header."""
    digits = [int(word) for word in refusal.replace("(", " ").split() if word.isdigit()]
    return max(1, digits[-1]) if digits else WINDOW_S


def _open(uri: str) -> Storage:
    if uri == "memory://":
        return MemoryStorage()
    storage = storage_from_string(uri)
    assert isinstance(storage, Storage)  # a synchronous scheme (redis://, memory://), never an async one
    return storage
