"""The LLM client against a real `transformers serve` SmolLM2 server: streaming, crash, recovery, overload."""

from __future__ import annotations

import threading
import time

import pytest

from chains.llm.client import LLMClient, LLMResult, LLMUnavailable
from tandem.settings import get_settings, reset_settings

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Where is my order?"}]


def _configure(monkeypatch, **env: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(f"TANDEM_{key.upper()}", value)
    reset_settings()


def test_stream_yields_deltas_then_a_result_with_token_counts(llm_server):
    items = list(LLMClient().stream(MESSAGES, max_tokens=8))
    *deltas, result = items
    assert deltas and all(isinstance(d, str) for d in deltas)
    assert isinstance(result, LLMResult)
    assert result.text == "".join(deltas)
    assert 0 < result.completion_tokens <= 8 and result.prompt_tokens > 5
    assert result.model == llm_server.model and result.tier == "default" and result.attempts == 1
    assert 0 < result.ttft_ms <= result.latency_ms


def test_crash_opens_the_breaker_and_recovery_closes_it(llm_server, monkeypatch):
    _configure(monkeypatch, llm_retries="1", breaker_failures="2", breaker_cooldown_s="3", llm_timeout_s="60")
    client = LLMClient()
    per_call_limit_s = 2 * get_settings().llm_timeout_s + 5  # two tries plus backoff: never a hang
    outcomes: list[tuple[str, float]] = []
    stop = threading.Event()
    first_success = threading.Event()

    def user() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                client.complete(MESSAGES, max_tokens=6)
                outcomes.append(("ok", time.monotonic() - started))
                first_success.set()
            except LLMUnavailable as exc:
                outcomes.append((exc.reason, time.monotonic() - started))
                time.sleep(0.2)
            except Exception as exc:  # anything else is a bug the chain could not handle
                outcomes.append((f"UNEXPECTED {exc!r}", time.monotonic() - started))

    users = [threading.Thread(target=user) for _ in range(3)]
    for thread in users:
        thread.start()
    assert first_success.wait(120), "no answer before the crash"
    llm_server.kill()
    deadline = time.monotonic() + 60
    while client.status()["breaker"] != "open" and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for thread in users:
        thread.join(per_call_limit_s)
    assert not any(thread.is_alive() for thread in users), "a call hung after the crash"
    assert client.status()["breaker"] == "open"
    assert not [o for o in outcomes if o[0].startswith("UNEXPECTED")]
    assert any(reason != "ok" for reason, _ in outcomes)
    assert max(seconds for _, seconds in outcomes) < per_call_limit_s
    with pytest.raises(LLMUnavailable, match="breaker open"):
        client.complete(MESSAGES, max_tokens=4)  # rejected fast while open

    llm_server.start(timeout=240)
    time.sleep(max(0.0, client._endpoint(client._select(None)).breaker.retry_after_s()))
    result = client.complete(MESSAGES, max_tokens=4)  # the half-open probe
    assert result.completion_tokens > 0 and result.attempts == 1
    assert client.status()["breaker"] == "closed"
    assert client.complete(MESSAGES, max_tokens=4).text


def test_saturation_turns_overload_on_then_off_with_hysteresis(llm_server, monkeypatch, db):
    from storage.settings_store import current_thresholds, save

    _configure(monkeypatch, llm_queue_wait_s="300", llm_max_in_flight="4")
    original = current_thresholds()
    save({"overload_enter": 0.75, "overload_exit": 0.3}, author="test", reason="saturation test")
    try:
        client = LLMClient()
        results: list[object] = []
        senders = [threading.Thread(target=lambda: results.append(client.complete(MESSAGES, max_tokens=6)))
                   for _ in range(8)]
        samples: list[tuple[float, bool]] = []
        for thread in senders:
            thread.start()
        while any(thread.is_alive() for thread in senders):
            status = client.status()
            samples.append((status["load"], status["overloaded"]))
            time.sleep(0.1)
        for thread in senders:
            thread.join()
        assert len(results) == 8 and all(isinstance(r, LLMResult) for r in results)
        assert any(on for _, on in samples), f"never overloaded: max load {max(l for l, _ in samples)}"
        # hysteresis: once on, it stays on until the load falls to the exit threshold
        switched_off = [load for (load, on), (_, was_on) in zip(samples[1:], samples) if was_on and not on]
        assert all(load <= 0.3 for load in switched_off)

        deadline = time.monotonic() + 30  # the latency signal fades within LATENCY_MEMORY_S once idle
        while client.status()["overloaded"] and time.monotonic() < deadline:
            time.sleep(0.2)
        status = client.status()
        assert status["overloaded"] is False and status["load"] <= 0.3 and status["in_flight"] == 0
        assert client.admit("someone")[0]
    finally:
        save(original.values(), author="test", reason="restore after saturation test")


def test_transformers_server_has_no_vllm_metrics(llm_server):
    client = LLMClient()
    client.complete(MESSAGES, max_tokens=2)
    deadline = time.monotonic() + 10
    while (client.status()["vllm"] or {}).get("available") is not False and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.status()["vllm"]["available"] is False
