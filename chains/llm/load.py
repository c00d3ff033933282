"""How busy the LLM endpoint is: in-flight calls, EWMA latency and time to first token, error rate,
and (where the server is vLLM) its own queue and KV-cache figures from ``/metrics``.

``load`` in [0, 1] is the most saturated of five signals, because any one of them alone makes users
wait: our calls in flight or queued vs ``llm_max_in_flight``; requests waiting inside vLLM; KV-cache
usage; recent latency vs the tier's typical latency; and an engine with a queue that became too busy to answer
``/metrics`` at all.
:class:`OverloadGate` turns that number into an on/off decision with hysteresis so the app does not flap between
LLM and small tier.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from urllib.parse import urlparse, urlunparse

from chains.llm.metrics_parser import VLLMMetrics, parse_vllm_metrics

log = logging.getLogger(__name__)

# A latency sample stops counting as "the server is slow now" over this many seconds without new samples,
# so an idle endpoint is not considered loaded because of the last burst.
LATENCY_MEMORY_S = 10.0
# vLLM figures older than this (endpoint gone, poller stuck) are ignored.
METRICS_STALE_S = 5.0
# A saturated engine on a small machine can take seconds to answer /metrics, and that is exactly when its queue
# figure matters: a 1 s limit dropped every reading during a CI load test and the gate never saw the queue.
METRICS_TIMEOUT_S = 3.0


class Ewma:
    """Exponentially weighted mean; the first sample sets it."""

    def __init__(self, alpha: float = 0.3):
        self.alpha = alpha
        self.value: float | None = None

    def add(self, sample: float) -> float:
        self.value = sample if self.value is None else self.alpha * sample + (1 - self.alpha) * self.value
        return self.value


class OverloadGate:
    """Hysteresis: turn on at ``load >= enter``, turn off only at ``load <= exit`` (exit < enter)."""

    def __init__(self):
        self.overloaded = False
        self.last_load = 0.0
        self._lock = threading.Lock()

    def update(self, load: float, enter: float, exit: float) -> bool:
        with self._lock:
            self.last_load = load
            if not self.overloaded and load >= enter:
                self.overloaded = True
            elif self.overloaded and load <= exit:
                self.overloaded = False
            return self.overloaded


def metrics_url_for(base_url: str) -> str:
    """vLLM serves /metrics at the server root, not under /v1."""
    parts = urlparse(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunparse(parts._replace(path=path + "/metrics", params="", query="", fragment=""))


class MetricsPoller:
    """Polls ``/metrics`` at most once per ``interval_s`` in a daemon thread started on first use.

    A 404 means the server is not vLLM (e.g. `transformers serve`): polling stops for good.
    Connection errors just leave the last figures to go stale; polling continues, and so does it after any
    other error in one poll (the thread must not die silently and leave the gate blind).
    """

    def __init__(self, url: str, interval_s: float = 1.0, timeout_s: float = METRICS_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic):
        self.url = url
        self.interval_s = max(1.0, interval_s)
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.latest: VLLMMetrics | None = None
        self.latest_at: float | None = None
        self.recent_ttft_ms: float | None = None  # mean over the last poll interval, from histogram deltas
        # Prefix-cache hit rate of the prompt tokens since the poll before the last one that saw new prompt tokens
        self.recent_prefix_hit_rate: float | None = None
        self.disabled_reason: str | None = None
        # When the last poll found the engine too busy to answer /metrics in time (None once it answers again)
        self.timed_out_at: float | None = None

    def ensure_started(self) -> None:
        with self._lock:
            if self._thread is not None or self.disabled_reason:
                return
            self._thread = threading.Thread(target=self._run, name="tandem-vllm-metrics", daemon=True)
            self._thread.start()

    def fresh(self) -> VLLMMetrics | None:
        with self._lock:
            if self.latest is None or self.latest_at is None or self._clock() - self.latest_at > METRICS_STALE_S:
                return None
            return self.latest

    def unresponsive(self) -> bool:
        """True while the most recent poll, within the staleness window, timed out after a reading that showed
        requests waiting: a queue that was building and then went silent. A timeout alone is not enough, since on
        a small machine one long generation can delay /metrics too, and that engine still takes new requests."""
        with self._lock:
            return (self.timed_out_at is not None and self._clock() - self.timed_out_at <= METRICS_STALE_S
                    and self.latest is not None and (self.latest.waiting or 0) > 0)

    def close(self) -> None:
        self._stop.set()

    def poll_once(self) -> None:
        import httpx

        try:
            response = httpx.get(self.url, timeout=self.timeout_s)
        except httpx.ReadTimeout:
            # Connected, but too busy to answer: a saturated engine on a small machine does this, and then its
            # last reading goes stale. Without this the gate went blind and let traffic into the queue it could
            # not see (a CI load test: the message waited for the LLM timeout instead of degrading). See
            # unresponsive() for when it counts.
            with self._lock:
                self.timed_out_at = self._clock()
            return
        except httpx.HTTPError:
            return
        if response.status_code == 404:
            with self._lock:
                self.disabled_reason = f"{self.url} answered 404 (not a vLLM server)"
            self._stop.set()
            return
        if response.status_code != 200:
            return
        try:
            metrics = parse_vllm_metrics(response.text)
        except ValueError as exc:
            log.warning("unreadable vLLM metrics at %s: %s", self.url, exc)
            return
        self.ingest(metrics)

    def ingest(self, metrics: VLLMMetrics) -> None:
        with self._lock:
            previous = self.latest
            if (previous is not None and metrics.ttft_count is not None and previous.ttft_count is not None
                    and metrics.ttft_count > previous.ttft_count and metrics.ttft_sum_s is not None
                    and previous.ttft_sum_s is not None):
                self.recent_ttft_ms = (1000.0 * (metrics.ttft_sum_s - previous.ttft_sum_s)
                                       / (metrics.ttft_count - previous.ttft_count))
            if (previous is not None and metrics.prefix_cache_queries is not None
                    and previous.prefix_cache_queries is not None and metrics.prefix_cache_hits is not None
                    and previous.prefix_cache_hits is not None
                    and metrics.prefix_cache_queries > previous.prefix_cache_queries):
                self.recent_prefix_hit_rate = ((metrics.prefix_cache_hits - previous.prefix_cache_hits)
                                               / (metrics.prefix_cache_queries - previous.prefix_cache_queries))
            self.latest = metrics
            self.latest_at = self._clock()
            self.timed_out_at = None
        publish_prefix_cache(self.url, metrics)

    def snapshot(self) -> dict | None:
        with self._lock:
            if self.disabled_reason:
                return {"available": False, "reason": self.disabled_reason}
            if self.latest is None:
                return None
            return {"available": True, **self.latest.as_dict(), "recent_ttft_ms": self.recent_ttft_ms,
                    "recent_prefix_cache_hit_rate": self.recent_prefix_hit_rate,
                    "age_s": round(self._clock() - (self.latest_at or 0.0), 1)}

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001  (logged; the next poll may succeed)
                log.exception("polling vLLM metrics at %s failed", self.url)
            self._stop.wait(self.interval_s)


class LoadTracker:
    """Per-endpoint bookkeeping of our own calls, plus the endpoint's vLLM metrics when it has them."""

    def __init__(self, capacity: int, typical_latency_ms: float, metrics_url: str | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.capacity = max(1, capacity)
        self.typical_latency_ms = typical_latency_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.capacity)
        self.in_flight = 0
        self.queued = 0
        self.latency = Ewma()
        self.ttft = Ewma()
        self.errors = Ewma(alpha=0.2)
        self.requests = 0
        self._last_sample_at: float | None = None
        self.poller = MetricsPoller(metrics_url, clock=clock) if metrics_url else None

    # --- call lifecycle ----------------------------------------------------------------------
    def acquire(self, wait_s: float) -> bool:
        """Take an in-flight slot, queueing up to ``wait_s``; False when the queue budget ran out."""
        if self.poller is not None:
            self.poller.ensure_started()
        with self._lock:
            self.queued += 1
        got = self._slots.acquire(timeout=max(0.0, wait_s))
        with self._lock:
            self.queued -= 1
            if got:
                self.in_flight += 1
        return got

    def release(self, ok: bool, latency_ms: float | None = None, ttft_ms: float | None = None) -> None:
        with self._lock:
            self.in_flight -= 1
            self.requests += 1
            self.errors.add(0.0 if ok else 1.0)
            if ok and latency_ms is not None:
                self.latency.add(latency_ms)
                self._last_sample_at = self._clock()
            if ok and ttft_ms is not None:
                self.ttft.add(ttft_ms)
        self._slots.release()

    # --- load ----------------------------------------------------------------------------------
    def components(self) -> dict[str, float]:
        if self.poller is not None:
            self.poller.ensure_started()  # the engine's own queue counts even before our first call
        with self._lock:
            concurrency = (self.in_flight + self.queued) / self.capacity
            latency = 0.0
            if self.latency.value is not None and self._last_sample_at is not None:
                # typical latency -> 0, twice typical -> 0.5, three times -> 1; fades once samples stop
                slowdown = (self.latency.value / self.typical_latency_ms - 1.0) / 2.0
                freshness = max(0.0, 1.0 - (self._clock() - self._last_sample_at) / LATENCY_MEMORY_S)
                latency = slowdown * freshness
        parts = {"concurrency": concurrency, "latency": latency}
        metrics = self.poller.fresh() if self.poller is not None else None
        if self.poller is not None and self.poller.unresponsive():
            parts["unresponsive"] = 1.0  # an engine too busy to report its queue is saturated
        if metrics is not None:
            if metrics.waiting is not None:
                parts["queue"] = metrics.waiting / self.capacity
            if metrics.kv_cache_usage is not None:
                parts["kv_cache"] = metrics.kv_cache_usage
        return {name: min(1.0, max(0.0, value)) for name, value in parts.items()}

    def load(self) -> float:
        return max(self.components().values())

    def snapshot(self) -> dict:
        parts = self.components()
        with self._lock:
            state = {
                "in_flight": self.in_flight, "queued": self.queued, "capacity": self.capacity,
                "requests": self.requests,
                "ewma_latency_ms": _round(self.latency.value), "ewma_ttft_ms": _round(self.ttft.value),
                "error_rate": round(self.errors.value or 0.0, 3),
                "typical_latency_ms": self.typical_latency_ms,
            }
        return {**state, "load": round(max(parts.values()), 3),
                "load_parts": {name: round(value, 3) for name, value in parts.items()},
                "vllm": self.poller.snapshot() if self.poller is not None else None}

    def close(self) -> None:
        if self.poller is not None:
            self.poller.close()


def publish_prefix_cache(url: str, metrics: VLLMMetrics) -> None:
    """vLLM's prefix-cache counters, as last read, on the app's own /metrics (one series per vLLM endpoint)."""
    from chains.llm import telemetry

    if metrics.prefix_cache_queries is not None:
        telemetry.LLM_PREFIX_CACHE_QUERIES.labels(url).set(metrics.prefix_cache_queries)
    if metrics.prefix_cache_hits is not None:
        telemetry.LLM_PREFIX_CACHE_HITS.labels(url).set(metrics.prefix_cache_hits)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
