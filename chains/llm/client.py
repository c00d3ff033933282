"""The resilient LLM client the router chain calls: tiers, timeouts, retries, circuit breaker, load.

Every call goes through LangChain's ``ChatOpenAI`` (one instance per (base_url, model), so tier edits take
effect without a restart) and streams, so time to first token is measured on every call. A call either
returns/streams an :class:`LLMResult` or raises :class:`LLMUnavailable` with a one-line reason; the chain
then answers from the small tier. It never hangs beyond ``llm_timeout_s`` per try.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable, Iterator

from pydantic import BaseModel

from chains.llm import telemetry as m
from chains.llm.breaker import BreakerState, CircuitBreaker
from chains.llm.load import LoadTracker, OverloadGate, metrics_url_for
from chains.llm.tiers import TierProfile, configured_tiers, select_tier
from tandem.settings import get_settings

BACKOFF_BASE_S = 0.25
BACKOFF_CAP_S = 2.0
ROLES = frozenset({"system", "user", "assistant"})


class LLMResult(BaseModel):
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    tier: str
    ttft_ms: float
    latency_ms: float
    attempts: int


class LLMUnavailable(Exception):
    """Every try failed, the breaker is open, or the call found no free slot in its queue budget."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Endpoint:
    """What one base_url owns: its breaker and its load tracker (tiers may share an endpoint)."""

    def __init__(self, base_url: str, tracker: LoadTracker, breaker: CircuitBreaker):
        self.base_url = base_url
        self.tracker = tracker
        self.breaker = breaker


class LLMClient:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 poll_metrics: bool = True):
        self._clock = clock
        self._sleep = sleep
        self._poll_metrics = poll_metrics
        self._lock = threading.Lock()
        self._chats: dict[tuple[str, str], Any] = {}
        self._endpoints: dict[str, _Endpoint] = {}
        self.gate = OverloadGate()

    # --- public API ----------------------------------------------------------------------------
    def complete(self, messages: list[dict], *, max_tokens: int | None = None,
                 score: float | None = None) -> LLMResult:
        result = None
        for item in self.stream(messages, max_tokens=max_tokens, score=score):
            if isinstance(item, LLMResult):
                result = item
        if result is None:  # stream() always ends with a result or raises; guard against a silent None
            raise LLMUnavailable("LLM stream ended without a result")
        return result

    def stream(self, messages: list[dict], *, max_tokens: int | None = None,
               score: float | None = None) -> Iterator[str | LLMResult]:
        """Text deltas as they arrive, then one :class:`LLMResult`. Raises LLMUnavailable (also midway)."""
        messages = _checked_messages(messages)
        settings = get_settings()
        max_tokens = _checked_max_tokens(max_tokens, settings.llm_max_tokens)
        tier = self._select(score)
        endpoint = self._endpoint(tier)
        chat = self._chat(tier)
        tries = 1 + settings.llm_retries

        if endpoint.breaker.retry_after_s() > 0:  # open and cooling down: reject before queueing
            m.LLM_REQUESTS.labels(tier.name, "breaker_open").inc()
            raise LLMUnavailable(f"LLM circuit breaker open for tier {tier.name} "
                                 f"(next probe in {endpoint.breaker.retry_after_s():.0f} s)")
        if not endpoint.tracker.acquire(settings.llm_queue_wait_s):
            self._evaluate()
            m.LLM_REQUESTS.labels(tier.name, "overloaded").inc()
            raise LLMUnavailable(f"LLM overloaded: no free slot within {settings.llm_queue_wait_s:.0f} s "
                                 f"({endpoint.tracker.capacity} in flight)")
        m.LLM_INFLIGHT.inc()
        self._evaluate()
        started = self._clock()
        outcome, latency_ms, ttft_ms = "error", None, None
        try:
            for attempt in range(1, tries + 1):
                if not endpoint.breaker.allow():
                    outcome = "breaker_open"
                    raise LLMUnavailable(f"LLM circuit breaker open for tier {tier.name}"
                                         + (f" after {attempt - 1} failed tries" if attempt > 1 else ""))
                parts: list[str] = []
                usage = None
                first_at = None
                try:
                    for chunk in chat.stream(messages, max_tokens=max_tokens):
                        if chunk.usage_metadata:
                            usage = chunk.usage_metadata
                        text = chunk.content if isinstance(chunk.content, str) else ""
                        if text:
                            if first_at is None:
                                first_at = self._clock()
                            parts.append(text)
                            yield text
                except Exception as exc:  # noqa: BLE001 - every transport/server failure is classified below
                    kind, retryable, server_alive = _classify(exc)
                    m.LLM_ERRORS.labels(kind).inc()
                    if server_alive:
                        endpoint.breaker.record_success()
                    else:
                        endpoint.breaker.record_failure()
                    if parts:
                        raise LLMUnavailable(f"LLM stream broke after {len(parts)} pieces ({kind}: "
                                             f"{_short(exc)})") from None
                    if not retryable or attempt == tries:
                        raise LLMUnavailable(f"LLM failed after {attempt} "
                                             f"{'try' if attempt == 1 else 'tries'} ({kind}: {_short(exc)})") from None
                    self._sleep(_backoff_s(attempt))
                    continue
                endpoint.breaker.record_success()
                now = self._clock()
                latency_ms = 1000.0 * (now - started)
                ttft_ms = 1000.0 * ((first_at or now) - started)
                text = "".join(parts)
                prompt_tokens, completion_tokens = _token_counts(usage, messages, parts)
                outcome = "ok"
                m.LLM_LATENCY.observe(latency_ms / 1000.0)
                yield LLMResult(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                model=tier.effective_model, tier=tier.name, ttft_ms=round(ttft_ms, 1),
                                latency_ms=round(latency_ms, 1), attempts=attempt)
                return
        except GeneratorExit:
            outcome = "abandoned"  # the consumer stopped reading; not the server's fault
            raise
        finally:
            endpoint.tracker.release(outcome == "ok", latency_ms, ttft_ms)
            m.LLM_INFLIGHT.dec()
            m.LLM_REQUESTS.labels(tier.name, outcome).inc()
            m.LLM_BREAKER_STATE.set(self._worst_breaker().gauge_value)
            self._evaluate()

    def admit(self, user_id: str) -> tuple[bool, str]:
        """Should this message use the LLM now? False + reason means degrade to the small tier."""
        if user_id and user_id in get_settings().vip_user_set:
            return True, "VIP user: LLM kept under load"
        load, overloaded, enter, exit_ = self._evaluate()
        if overloaded:
            m.LLM_DEGRADED.inc()
            if load >= enter:
                return False, f"LLM overloaded (load {load:.2f} >= {enter:.2f}); degraded to small tier"
            return False, (f"LLM overloaded (load {load:.2f}, recovers at <= {exit_:.2f}); "
                           "degraded to small tier")
        return True, f"LLM load {load:.2f}"

    def status(self) -> dict:
        load, overloaded, enter, exit_ = self._evaluate()
        tiers = []
        for tier in self._tiers():
            endpoint = self._endpoint(tier)
            tiers.append({"name": tier.name, "base_url": tier.base_url, "model": tier.effective_model,
                          "min_score": tier.min_score, "cost_per_1k_tokens": tier.cost_per_1k_tokens,
                          "breaker": endpoint.breaker.snapshot(), **endpoint.tracker.snapshot()})
        primary = tiers[0]
        return {
            "in_flight": sum(t["in_flight"] for t in tiers),
            "queued": sum(t["queued"] for t in tiers),
            "ewma_latency_ms": primary["ewma_latency_ms"],
            "ewma_ttft_ms": primary["ewma_ttft_ms"],
            "error_rate": max(t["error_rate"] for t in tiers),
            "load": round(load, 3),
            "overloaded": overloaded,
            "overload_enter": enter,
            "overload_exit": exit_,
            "breaker": self._worst_breaker().value,
            "vllm": primary["vllm"],
            "tiers": tiers,
        }

    def close(self) -> None:
        with self._lock:
            for endpoint in self._endpoints.values():
                endpoint.tracker.close()

    # --- internals -----------------------------------------------------------------------------
    def _tiers(self) -> list[TierProfile]:
        return configured_tiers()

    def _select(self, score: float | None) -> TierProfile:
        if score is not None and not 0.0 <= score <= 1.0:
            raise ValueError(f"score must be between 0 and 1, got {score}")
        return select_tier(score, self._tiers())

    def _endpoint(self, tier: TierProfile) -> _Endpoint:
        with self._lock:
            endpoint = self._endpoints.get(tier.base_url)
            if endpoint is None:
                settings = get_settings()
                tracker = LoadTracker(settings.llm_max_in_flight, tier.typical_latency_ms,
                                      metrics_url_for(tier.base_url) if self._poll_metrics else None,
                                      clock=self._clock)
                breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_window_s,
                                         settings.breaker_cooldown_s, clock=self._clock)
                endpoint = self._endpoints[tier.base_url] = _Endpoint(tier.base_url, tracker, breaker)
            endpoint.tracker.typical_latency_ms = tier.typical_latency_ms  # operator edits apply live
            return endpoint

    def _chat(self, tier: TierProfile):
        key = (tier.base_url, tier.effective_model)
        with self._lock:
            chat = self._chats.get(key)
            if chat is None:
                from langchain_openai import ChatOpenAI

                settings = get_settings()
                chat = self._chats[key] = ChatOpenAI(
                    base_url=tier.base_url, api_key=settings.llm_api_key, model=tier.effective_model,
                    timeout=settings.llm_timeout_s, max_retries=0, streaming=True, stream_usage=True)
            return chat

    def _worst_breaker(self) -> BreakerState:
        with self._lock:
            states = [e.breaker.state for e in self._endpoints.values()]
        return max(states, key=lambda s: s.gauge_value, default=BreakerState.CLOSED)

    def _evaluate(self) -> tuple[float, bool, float, float]:
        """Current load over the configured tiers and the hysteresis decision (thresholds read live)."""
        from storage.settings_store import live_settings

        live = live_settings()
        load = max((self._endpoint(t).tracker.load() for t in self._tiers()), default=0.0)
        overloaded = self.gate.update(load, live.overload_enter, live.overload_exit)
        return load, overloaded, live.overload_enter, live.overload_exit


_CLIENT: LLMClient | None = None
_CLIENT_LOCK = threading.Lock()


def get_llm_client() -> LLMClient:
    """The process-wide client, created on first use (no network or model load at import)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = LLMClient()
        return _CLIENT


def reset_llm_client() -> None:
    """Drop the singleton (tests change the endpoint or the breaker settings between cases)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is not None:
            _CLIENT.close()
        _CLIENT = None


# --- helpers -------------------------------------------------------------------------------------
def _checked_messages(messages: Any) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES \
                or not isinstance(message.get("content"), str):
            raise ValueError(f"message #{index} must be a dict with role in {sorted(ROLES)} and string content")
    return [{"role": msg["role"], "content": msg["content"]} for msg in messages]


def _checked_max_tokens(max_tokens: int | None, default: int) -> int:
    if max_tokens is None:
        return default
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    return max_tokens


def _backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter, so retrying clients do not hit a recovering server in lockstep."""
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)


def _classify(exc: Exception) -> tuple[str, bool, bool]:
    """(kind, retryable, server_alive). A 4xx means the server works but refuses this request."""
    import httpx
    import openai

    if isinstance(exc, openai.APITimeoutError) or isinstance(exc, httpx.TimeoutException):
        return "timeout", True, False
    if isinstance(exc, openai.RateLimitError):
        return "rate_limited", True, False
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500:
            return "server_error", True, False
        return "rejected", False, True
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        return "connection", True, False
    return "other", True, False


def _short(exc: Exception, limit: int = 160) -> str:
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _token_counts(usage: Any, messages: list[dict], parts: list[str]) -> tuple[int, int]:
    """Server-reported usage when present; otherwise about 4 characters a token for the prompt and one
    token per streamed delta (servers stream one token per chunk)."""
    if usage:
        return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    prompt_chars = sum(len(msg["content"]) for msg in messages)
    return max(1, prompt_chars // 4), len(parts)
