"""The resilient LLM client the router chain calls: tiers, timeouts, retries, circuit breaker, load, cancel.

Every call goes through LangChain's ``ChatOpenAI`` (one instance per (base_url, model), so tier edits take
effect without a restart) and streams, so time to first token is measured on every call. A call either
returns/streams an :class:`LLMResult` or raises :class:`LLMUnavailable` with a one-line reason; the chain
then answers from the small tier. It never hangs beyond ``llm_timeout_s`` per try.

Cancelling closes the HTTP stream; vLLM aborts a request whose client went away, so the engine stops
generating at once (``vllm:num_requests_running`` drops).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from chains.llm import telemetry as m
from chains.llm.base import LLM, LLMResult, LLMUnavailable
from chains.llm.breaker import BreakerState, CircuitBreaker
from chains.llm.endpoints import TierProfile, parse_tiers_or_default, select_tier
from chains.llm.load import LoadTracker, OverloadGate, metrics_url_for
from core.policy import Thresholds
from core.settings import Settings

# What the CPU vLLM serves the converted SmolLM2 as (tandem llm-server --served-model-name); used only
# when no model is configured and the endpoint cannot be asked.
DEFAULT_SERVED_MODEL = "smollm2"
BACKOFF_BASE_S = 0.25
BACKOFF_CAP_S = 2.0
ROLES = frozenset({"system", "user", "assistant"})


class _Endpoint:
    """What one base_url owns: its breaker and its load tracker (tiers may share an endpoint)."""

    def __init__(self, base_url: str, tracker: LoadTracker, breaker: CircuitBreaker):
        self.base_url = base_url
        self.tracker = tracker
        self.breaker = breaker


@dataclass
class _Call:
    """One stream() call: what its tries share, and what its end reports (the tracker, the metrics)."""

    tier: TierProfile
    endpoint: _Endpoint
    started: float
    model: str = ""
    outcome: str = "error"
    latency_ms: float | None = None
    ttft_ms: float | None = None
    chunks: Any = None  # the current try's stream: closed when the consumer goes away or cancels


@dataclass
class _Try:
    """What one try streamed."""

    attempt: int
    parts: list[str] = field(default_factory=list)
    usage: Any = None
    first_at: float | None = None
    finish: str = ""


class LLMClient(LLM):
    def __init__(self, settings: Settings, policy: Callable[[], Thresholds] | None = None, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 jitter: Callable[[float, float], float] = random.uniform, poll_metrics: bool = True):
        self.settings = settings
        self._policy = policy or (lambda: Thresholds.defaults(self.settings))
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._poll_metrics = poll_metrics
        self._lock = threading.Lock()
        self._chats: dict[tuple[str, str], Any] = {}
        self._endpoints: dict[str, _Endpoint] = {}
        self._served: dict[str, str] = {}
        self._no_priority: set[str] = set()
        self.gate = OverloadGate()

    # --- public API ----------------------------------------------------------------------------
    def stream(self, messages: list[dict], *, max_tokens: int | None = None, score: float | None = None,
               cancel: threading.Event | None = None, temperature: float | None = None,
               user_id: str = "", priority: int = 0) -> Iterator[str | LLMResult]:
        """Text deltas as they arrive, then one :class:`LLMResult`. Raises LLMUnavailable (also midway)."""
        messages = _checked_messages(messages)
        max_tokens = _checked_max_tokens(max_tokens, self.settings.llm_max_tokens)
        temperature = self.settings.llm_temperature if temperature is None else temperature
        tier = self._select(score)
        call = self._enter(tier, self._endpoint(tier))
        try:
            call.model = self._model_for(tier)
            chat = self._chat(tier.base_url, call.model)
            tries = 1 + self.settings.llm_retries
            for attempt in range(1, tries + 1):
                if not call.endpoint.breaker.allow():
                    call.outcome = "breaker_open"
                    raise LLMUnavailable(f"LLM circuit breaker open for tier {tier.name}"
                                         + (f" after {attempt - 1} failed tries" if attempt > 1 else ""))
                options: dict[str, Any] = {"max_tokens": max_tokens}
                if temperature is not None:
                    options["temperature"] = temperature
                tried = yield from self._try(call, chat, messages, options, (user_id, priority), cancel, attempt, tries)
                if tried is None:  # a retryable failure before any text
                    self._sleep(_backoff_s(attempt, self._jitter))
                    continue
                yield self._result(call, tried, messages, cancel)
                return
        except GeneratorExit:
            call.outcome = "abandoned"  # the consumer stopped reading; not the server's fault
            if call.chunks is not None:
                call.chunks.close()  # close the HTTP stream now, not at garbage collection: the engine aborts
            raise
        finally:
            self._leave(call)

    def admit(self, user_id: str) -> tuple[bool, str]:
        """Should this message use the LLM now? False + reason means degrade to the small tier."""
        if user_id and user_id in self.settings.vip_user_set:
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
            model = tier.model or self._served.get(tier.base_url, "")
            tiers.append({"name": tier.name, "base_url": tier.base_url, "model": model,
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
    def _enter(self, tier: TierProfile, endpoint: _Endpoint) -> _Call:
        """Admit one call to the endpoint (breaker cooling down, or no free slot in time: LLMUnavailable)."""
        settings = self.settings
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
        return _Call(tier, endpoint, started=self._clock())

    def _try(self, call: _Call, chat: Any, messages: list[dict], options: dict[str, Any], caller: tuple[str, int],
             cancel: threading.Event | None, attempt: int, tries: int) -> Generator[str, None, _Try | None]:
        """One try: its text pieces as they arrive; returns what it streamed, or None when it failed before any
        text and may be retried. Raises LLMUnavailable when it may not. ``caller``: (user id, asked priority)."""
        tried = _Try(attempt)
        priority = self._priority_for(*caller, call.tier.base_url)  # asked per try: a refusal turns it off
        if priority:
            options = {**options, "extra_body": {"priority": priority}}
        call.chunks = chat.stream(messages, **options)
        try:
            for chunk in call.chunks:
                if chunk.usage_metadata:
                    tried.usage = chunk.usage_metadata
                tried.finish = (chunk.response_metadata or {}).get("finish_reason") or tried.finish
                text = chunk.content if isinstance(chunk.content, str) else ""
                if text:
                    if tried.first_at is None:
                        tried.first_at = self._clock()
                    tried.parts.append(text)
                    yield text
                if cancel is not None and cancel.is_set():
                    break
        except Exception as exc:  # noqa: BLE001 - every transport/server failure is classified below
            self._failed(call, tried, exc, priority, tries)
            return None
        return tried

    def _failed(self, call: _Call, tried: _Try, exc: Exception, priority: int, tries: int) -> None:
        """Breaker bookkeeping for a failed try; raises LLMUnavailable unless the call may try again."""
        kind, retryable, server = _classify(exc)
        if priority and kind == "rejected" and "priority" in str(exc).lower() and not tried.parts:
            # This server does not schedule by priority: stop asking it to, and try again at once.
            with self._lock:
                self._no_priority.add(call.tier.base_url)
            retryable = True
        m.LLM_ERRORS.labels(kind).inc()
        if server == "alive":
            call.endpoint.breaker.record_success()
        elif server == "down":
            call.endpoint.breaker.record_failure()
        if tried.parts:
            raise LLMUnavailable(f"LLM stream broke after {len(tried.parts)} pieces ({kind}: "
                                 f"{_short(exc)})") from None
        attempt = tried.attempt
        if not retryable or attempt == tries:
            raise LLMUnavailable(f"LLM failed after {attempt} "
                                 f"{'try' if attempt == 1 else 'tries'} ({kind}: {_short(exc)})") from None

    def _result(self, call: _Call, tried: _Try, messages: list[dict], cancel: threading.Event | None) -> LLMResult:
        """A try that streamed to its end (or to a cancel): its usage, timings and latency metric."""
        cancelled = cancel is not None and cancel.is_set()
        if cancelled:
            call.chunks.close()  # closes the HTTP stream: the engine aborts the request
        call.endpoint.breaker.record_success()
        now = self._clock()
        latency_ms = call.latency_ms = 1000.0 * (now - call.started)
        ttft_ms = call.ttft_ms = 1000.0 * ((tried.first_at or now) - call.started)
        prompt_tokens, completion_tokens = _token_counts(tried.usage, messages, tried.parts)
        call.outcome = "cancelled" if cancelled else "ok"
        if not cancelled:
            m.LLM_LATENCY.observe(latency_ms / 1000.0)
        return LLMResult(text="".join(tried.parts), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                         model=call.model, tier=call.tier.name, ttft_ms=round(ttft_ms, 1),
                         latency_ms=round(latency_ms, 1), attempts=tried.attempt, cancelled=cancelled,
                         finish_reason="cancelled" if cancelled else tried.finish)

    def _leave(self, call: _Call) -> None:
        """The call's end, however it ended: its slot back, its outcome counted, the load re-evaluated."""
        ok = call.outcome == "ok"
        call.endpoint.tracker.release(call.outcome in ("ok", "cancelled"), call.latency_ms if ok else None,
                                      call.ttft_ms)
        m.LLM_INFLIGHT.dec()
        m.LLM_REQUESTS.labels(call.tier.name, call.outcome).inc()
        m.LLM_BREAKER_STATE.set(self._worst_breaker().gauge_value)
        self._evaluate()

    def _tiers(self) -> list[TierProfile]:
        return parse_tiers_or_default(self._policy().tiers, self.settings)

    def _select(self, score: float | None) -> TierProfile:
        if score is not None and not 0.0 <= score <= 1.0:
            raise ValueError(f"score must be between 0 and 1, got {score}")
        return select_tier(score, self._tiers())

    def _endpoint(self, tier: TierProfile) -> _Endpoint:
        with self._lock:
            endpoint = self._endpoints.get(tier.base_url)
            if endpoint is None:
                settings = self.settings
                tracker = LoadTracker(settings.llm_max_in_flight, tier.typical_latency_ms,
                                      metrics_url_for(tier.base_url) if self._poll_metrics else None,
                                      clock=self._clock)
                breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_window_s,
                                         settings.breaker_cooldown_s, clock=self._clock)
                endpoint = self._endpoints[tier.base_url] = _Endpoint(tier.base_url, tracker, breaker)
            endpoint.tracker.typical_latency_ms = tier.typical_latency_ms  # operator edits apply live
            return endpoint

    def _priority_for(self, user_id: str, asked: int, base_url: str) -> int:
        """A VIP's priority, else the caller's own (the idle-time worker's lowest); 0 once the server refused one."""
        vip = bool(user_id) and user_id in self.settings.vip_user_set and bool(self.settings.llm_vip_priority)
        priority = self.settings.llm_vip_priority if vip else asked
        with self._lock:
            return 0 if not priority or base_url in self._no_priority else priority

    def _model_for(self, tier: TierProfile) -> str:
        """The tier's model, or (none set) the first model the endpoint serves, asked once per endpoint."""
        if tier.model:
            return tier.model
        with self._lock:
            known = self._served.get(tier.base_url)
        if known:
            return known
        import httpx

        try:
            response = httpx.get(tier.base_url.rstrip("/") + "/models", timeout=min(5.0, self.settings.llm_timeout_s),
                                 headers={"Authorization": f"Bearer {self.settings.llm_api_key}"})
            served = [m["id"] for m in response.json().get("data", []) if m.get("id")]
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            served = []
        if not served:
            return DEFAULT_SERVED_MODEL  # unreachable now: the call itself will fail and be classified
        with self._lock:
            self._served[tier.base_url] = served[0]
        return served[0]

    def _chat(self, base_url: str, model: str):
        key = (base_url, model)
        with self._lock:
            chat = self._chats.get(key)
            if chat is None:
                from langchain_openai import ChatOpenAI

                settings = self.settings
                chat = self._chats[key] = ChatOpenAI(
                    base_url=base_url, api_key=settings.llm_api_key, model=model,
                    timeout=settings.llm_timeout_s, max_retries=0, streaming=True, stream_usage=True)
            return chat

    def _worst_breaker(self) -> BreakerState:
        with self._lock:
            states = [e.breaker.state for e in self._endpoints.values()]
        return max(states, key=lambda s: s.gauge_value, default=BreakerState.CLOSED)

    def _evaluate(self) -> tuple[float, bool, float, float]:
        """Current load over the configured tiers and the hysteresis decision (thresholds read live)."""
        live = self._policy()
        load = max((self._endpoint(t).tracker.load() for t in self._tiers()), default=0.0)
        overloaded = self.gate.update(load, live.overload_enter, live.overload_exit)
        return load, overloaded, live.overload_enter, live.overload_exit


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


def _backoff_s(attempt: int, jitter: Callable[[float, float], float] = random.uniform) -> float:
    """Exponential backoff with jitter, so retrying clients do not hit a recovering server in lockstep."""
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1)) * jitter(0.5, 1.5)


def _classify(exc: Exception) -> tuple[str, bool, str]:
    """(kind, retryable, what it says about the server: "down", "alive" or "ours").

    A 4xx means the server works but refuses this request. Anything that is not a transport or server
    failure is a fault on our side (a parsing bug, a bad argument): retrying repeats it, and the server did
    nothing wrong, so the breaker counts it neither way.
    """
    import json

    import httpx
    import openai

    if isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError)):
        return "malformed", True, "down"  # the server answered, but not in the protocol
    if isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
        return "timeout", True, "down"
    if isinstance(exc, openai.RateLimitError):
        return "rate_limited", True, "down"
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500:
            return "server_error", True, "down"
        return "rejected", False, "alive"
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        return "connection", True, "down"
    return "other", False, "ours"


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
