"""The shared state in Redis, so every app replica sees one cache and one set of rate-limit counters.

* Rate limits: one sorted set per key (user, session) holding the event times of the last window, checked and
  counted for all keys in one Lua script, timed by Redis' own clock: atomic across replicas, and a replica with
  a skewed clock counts the same.
* Cache: each entry is one Redis string (``<prefix>e:<namespace>:<key hash>``) holding its payload, with Redis'
  own expiry; exact hits are one GET. For semantic hits every replica keeps a local copy of the namespace's
  entries, brought up to date from a per-namespace Redis stream of entry ids (one XRANGE for what is newer than
  the last id read, and an MGET only for what is new), so a semantic lookup is a local matrix product, not a
  download of every vector. Each append trims the stream of ids older than two entry lifetimes, so it holds at
  most two TTLs of traffic however long the cache runs (stream ids are stable under trimming; list positions
  were not).

When Redis cannot be reached, every call falls back to a :class:`MemoryState` of this process (cache and limits
per replica, the single-process behaviour), ``problem`` says so for /healthz and the console, and the next call
after ``retry_s`` tries Redis again. Nothing a customer sends fails because Redis is down.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from chains.state import CacheEntry, MemoryState, SharedState, Vectors
from core.pii import host_of

log = logging.getLogger(__name__)
T = TypeVar("T")

# KEYS: the counters; ARGV: limit, window (ms), a unique member. Returns 0 when counted, else ms to wait.
SLIDING_WINDOW = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return math.max(1, window - (now - tonumber(oldest[2])))
  end
end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
end
return 0
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Mirror:
    """This replica's copy of one namespace's entries, and the last stream id of the namespace it has read."""

    def __init__(self) -> None:
        self.last_id = ""
        self.ids: list[str] = []
        self.entries: list[CacheEntry] = []
        self.matrix = np.zeros((0, 0), np.float32)


class RedisState(SharedState):
    name = "redis"

    def __init__(self, url: str, prefix: str = "tandem:", retry_s: float = 5.0, socket_timeout_s: float = 0.5,
                 clock: Callable[[], float] = time.time):
        import redis

        self.url, self.prefix, self.retry_s = url, prefix, retry_s
        self._client = redis.Redis.from_url(url, socket_timeout=socket_timeout_s,
                                            socket_connect_timeout=socket_timeout_s)
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._window = self._client.register_script(SLIDING_WINDOW)
        self.local = MemoryState(clock=clock)  # the fallback while Redis is unreachable
        self._clock = clock
        self._down_until = 0.0
        self.problem = ""
        self._lock = threading.Lock()  # guards the mirrors; a rate-limit check never waits on it
        self._mirrors: dict[str, _Mirror] = {}
        self._counter = itertools.count()

    # --- fallback -------------------------------------------------------------------------------------
    def _call(self, action: Callable[[], T], fallback: Callable[[], T]) -> T:
        if time.monotonic() < self._down_until:
            return fallback()
        try:
            result = action()
        except self._errors as exc:
            self._down_until = time.monotonic() + self.retry_s
            if not self.problem:
                log.warning("Redis at %s unreachable (%s): cache and rate limits are per replica until it is back",
                            host_of(self.url), exc)
            self.problem = (f"Redis unreachable ({exc.__class__.__name__}): cache and rate limits are per replica "
                            f"until it is back (retrying every {self.retry_s:g} s)")
            return fallback()
        if self.problem:
            log.warning("Redis at %s is back: shared cache and limits again", host_of(self.url))
            self.problem = ""
        return result

    # --- rate limits ----------------------------------------------------------------------------------
    def hit(self, keys: Sequence[str], limit: int, window_s: float) -> float:
        def shared() -> float:
            member = f"{time.time_ns()}:{id(self)}:{next(self._counter)}"
            wait_ms = self._window(keys=[f"{self.prefix}rl:{k}" for k in keys],
                                   args=[limit, int(window_s * 1000), member])
            return float(wait_ms) / 1000.0

        return self._call(shared, lambda: self.local.hit(keys, limit, window_s))

    # --- cache ----------------------------------------------------------------------------------------
    def _entry_key(self, namespace: str, key: str) -> str:
        return f"{self.prefix}e:{namespace}:{hashlib.sha1(key.encode()).hexdigest()}"

    def _ids_key(self, namespace: str) -> str:
        return f"{self.prefix}ids:{namespace}"

    @staticmethod
    def _encode(entry: CacheEntry) -> bytes:
        return json.dumps({"namespace": entry.namespace, "key": entry.key, "text": entry.text,
                           "negations": sorted(entry.negations), "payload": entry.payload,
                           "expires_at": entry.expires_at,
                           "vector": np.asarray(entry.vector, dtype=np.float32).tobytes().hex()}).encode()

    @staticmethod
    def _decode(raw: Any) -> CacheEntry | None:
        if raw is None:
            return None
        data = json.loads(raw)
        return CacheEntry(namespace=data["namespace"], key=data["key"], text=data["text"],
                          negations=frozenset(data["negations"]), payload=data["payload"],
                          expires_at=float(data["expires_at"]),
                          vector=np.frombuffer(bytes.fromhex(data["vector"]), dtype=np.float32))

    def cache_get(self, namespace: str, key: str) -> CacheEntry | None:
        return self._call(lambda: self._decode(self._client.get(self._entry_key(namespace, key))),
                          lambda: self.local.cache_get(namespace, key))

    def cache_put(self, entry: CacheEntry) -> bool:
        ttl_ms = int((entry.expires_at - self._clock()) * 1000)
        if ttl_ms <= 0:
            return False

        def shared() -> bool:
            name = self._entry_key(entry.namespace, entry.key)
            if not self._client.set(name, self._encode(entry), px=ttl_ms, nx=True):
                return False
            ids = self._ids_key(entry.namespace)
            # Ids older than two lifetimes name expired entries. Two, not one: stream ids are Redis' clock, this is
            # the replica's, and a skew under one TTL must not trim live ids (or the one just added).
            expired_before_ms = int(self._clock() * 1000) - 2 * ttl_ms
            pipe = self._client.pipeline()
            pipe.xadd(ids, {"name": name}, minid=str(max(0, expired_before_ms)), approximate=False)
            pipe.pexpire(ids, ttl_ms)  # the stream lives as long as its newest entry
            pipe.execute()
            return True

        return self._call(shared, lambda: self.local.cache_put(entry))

    def cache_delete(self, namespace: str, key: str) -> bool:
        """Deleted in Redis and in this replica's mirror; other replicas' mirrors keep their copy of a semantic entry
        until it expires (a prepared answer's hit is vouched for by its database row, chains/router_chain.py)."""
        name = self._entry_key(namespace, key)
        deleted = bool(self._call(lambda: self._client.delete(name), lambda: 0))
        with self._lock:
            mirror = self._mirrors.get(namespace)
            if mirror is not None and name in mirror.ids:
                keep = [i for i, n in enumerate(mirror.ids) if n != name]
                mirror.ids = [mirror.ids[i] for i in keep]
                mirror.entries = [mirror.entries[i] for i in keep]
                mirror.matrix = mirror.matrix[keep] if keep else np.zeros((0, 0), np.float32)
        return self.local.cache_delete(namespace, key) or deleted

    def cache_vectors(self, namespace: str) -> Vectors:
        return self._call(lambda: self._shared_vectors(namespace), lambda: self.local.cache_vectors(namespace))

    def _shared_vectors(self, namespace: str) -> Vectors:
        ids_key = self._ids_key(namespace)
        with self._lock:
            mirror = self._mirrors.setdefault(namespace, _Mirror())
            # Stream ids only grow (a stream that expired and started again continues after them): "after the
            # last id read" is always exactly what is new.
            new = self._client.xrange(ids_key, min=f"({mirror.last_id}" if mirror.last_id else "-", max="+")
            if new:
                mirror.last_id = _text(new[-1][0])
                names = [_text((fields or {}).get(b"name", b"")) for _, fields in new]
                fresh = [self._decode(raw) for raw in self._client.mget(names)]
                for name, entry in zip(names, fresh):
                    if entry is not None:
                        mirror.ids.append(name)
                        mirror.entries.append(entry)
                rows = [np.asarray(e.vector, dtype=np.float32) for e in mirror.entries]
                mirror.matrix = np.vstack(rows) if rows else np.zeros((0, 0), np.float32)
            now = self._clock()
            live = [i for i, e in enumerate(mirror.entries) if e.expires_at > now]
            if len(live) != len(mirror.entries):
                mirror.ids = [mirror.ids[i] for i in live]
                mirror.entries = [mirror.entries[i] for i in live]
                mirror.matrix = mirror.matrix[live] if live else np.zeros((0, 0), np.float32)
            return Vectors(mirror.matrix, list(mirror.entries))

    def cache_size(self) -> int:
        def shared() -> int:
            return sum(1 for _ in self._client.scan_iter(match=f"{self.prefix}e:*", count=1000))

        return self._call(shared, self.local.cache_size)

    def cache_clear(self) -> None:
        def shared() -> None:
            for pattern in (f"{self.prefix}e:*", f"{self.prefix}ids:*"):
                names = list(self._client.scan_iter(match=pattern, count=1000))
                if names:
                    self._client.delete(*names)

        self._call(shared, lambda: None)
        self.local.cache_clear()
        with self._lock:
            self._mirrors.clear()

    def status(self) -> dict[str, Any]:
        # The host only: the URL may hold a password, and /healthz is public.
        status = {"backend": "redis" if not self.problem else "redis (down: per-replica fallback)",
                  "url": host_of(self.url),
                  "cache_entries": self.cache_size()}
        if self.problem:
            status["problem"] = self.problem
        return status
