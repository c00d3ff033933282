"""The LLM client against the real vLLM server (CPU build): streaming, cancellation, crash and recovery, and the
load gate reading vLLM's own queue from /metrics."""

from __future__ import annotations

import json
import threading
import time

import pytest

from chains.llm.client import LLMClient, LLMResult, LLMUnavailable
from core.policy import Thresholds
from tests.vllm_load import LONG_PROMPT, engine_idle, engine_metrics, saturated, wait_for

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Where is my order?"}]


def test_stream_yields_several_deltas_then_a_result_with_the_engines_token_counts(llm_client, llm_server):
    items = list(llm_client.stream(MESSAGES, max_tokens=8, temperature=0.0))  # greedy: the same reply every run
    *deltas, result = items
    assert len(deltas) > 1 and all(isinstance(d, str) for d in deltas)
    assert isinstance(result, LLMResult) and not result.cancelled
    assert result.text == "".join(deltas)
    assert 0 < result.completion_tokens <= 8 and result.prompt_tokens > 5
    assert result.model == llm_server.model == "smollm2" and result.tier == "default" and result.attempts == 1
    assert 0 < result.ttft_ms <= result.latency_ms
    assert result.finish_reason in ("stop", "length")


def test_without_a_model_name_the_client_asks_the_endpoint_which_one_it_serves(llm_settings, llm_server):
    client = LLMClient(llm_settings.model_copy(update={"llm_model": ""}))
    try:
        result = client.complete(MESSAGES, max_tokens=2, temperature=0.0)
    finally:
        client.close()
    assert result.model == llm_server.model  # from GET /v1/models


def test_cancel_aborts_the_request_inside_the_engine(llm_client, llm_server):
    assert wait_for(lambda: engine_idle(llm_server.url), 60), "an earlier test's generation is still running"
    before = engine_metrics(llm_server.url)["generated_tokens"]
    cancel = threading.Event()
    stream = llm_client.stream(LONG_PROMPT, max_tokens=400, cancel=cancel, temperature=0.0)
    received = [next(stream) for _ in range(3)]
    assert engine_metrics(llm_server.url)["running"] >= 1
    cancel.set()
    result = next(item for item in stream if isinstance(item, LLMResult))
    # How fast is for `make bench`; the bound here is generous (two busy cores). What proves the abort is the
    # engine's own token count: left running, the request would write its 400 tokens (the story asks for more).
    assert wait_for(lambda: engine_metrics(llm_server.url)["running"] == 0, 60), "vLLM kept generating"
    assert engine_metrics(llm_server.url)["generated_tokens"] - before < 200
    assert result.cancelled and result.finish_reason == "cancelled" and result.text.startswith("".join(received))
    assert result.completion_tokens < 400


def test_the_temperature_setting_applies_when_a_request_sets_none_and_a_requests_own_overrides_it(llm_settings,
                                                                                                   llm_server):
    client = LLMClient(llm_settings.model_copy(update={"llm_temperature": 0.0}))
    try:
        greedy = [client.complete(MESSAGES, max_tokens=24).text for _ in range(2)]
        sampled = {client.complete(MESSAGES, max_tokens=24, temperature=1.5).text for _ in range(4)}
    finally:
        client.close()
    assert greedy[0] and greedy[0] == greedy[1]  # setting 0: the same question, the same answer
    assert len(sampled) > 1, sampled  # the request's own temperature wins: four samples, not one answer


def test_the_served_folder_carries_smollm2s_recommended_sampling_and_the_engine_applies_it(llm_server):
    from core.settings import get_settings
    from tandem.llm_server import prepare_model_folder

    config = json.loads((prepare_model_folder(get_settings()) / "generation_config.json").read_text())
    assert (config["temperature"], config["top_p"]) == (0.2, 0.9)
    assert "overridden by the model's `generation_config.json`" in llm_server.log_path.read_text()


def test_crash_opens_the_breaker_and_recovery_closes_it(llm_settings, llm_server):
    settings = llm_settings.model_copy(update={"llm_retries": 1, "breaker_failures": 2, "breaker_cooldown_s": 3.0,
                                               "llm_timeout_s": 60.0})
    client = LLMClient(settings)
    per_call_limit_s = 2 * settings.llm_timeout_s + 5  # two tries plus backoff: never a hang
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

    llm_server.start(timeout=300)
    time.sleep(max(0.0, client._endpoint(client._select(None)).breaker.retry_after_s()))
    result = client.complete(MESSAGES, max_tokens=4)  # the half-open probe
    assert result.completion_tokens > 0 and result.attempts == 1
    assert client.status()["breaker"] == "closed"
    assert client.complete(MESSAGES, max_tokens=4).text
    client.close()


def test_vllms_own_queue_turns_the_gate_on_and_it_turns_off_once_drained(llm_settings, llm_server):
    """Other replicas saturate the engine: our client has nothing in flight, yet vLLM's waiting queue degrades."""
    policy = Thresholds.defaults(llm_settings).model_copy(update={"overload_enter": 0.75, "overload_exit": 0.3})
    client = LLMClient(llm_settings.model_copy(update={"vip_users": "vip-1"}), lambda: policy)
    assert client.admit("alice")[0]
    with saturated(llm_server.url, "smollm2", requests=12) as load:
        load.queued(at_least=3)
        assert wait_for(lambda: not client.admit("alice")[0], 30), client.status()
        admitted, reason = client.admit("alice")
        assert not admitted and "overloaded" in reason
        assert client.admit("vip-1") == (True, "VIP user: LLM kept under load")
        status = client.status()
        assert status["overloaded"] and status["vllm"]["available"] and status["vllm"]["waiting"] >= 3
        assert status["in_flight"] == 0  # the load is vLLM's, seen through its /metrics
    # hysteresis: it stays on while the queue drains past enter, and turns off only at exit
    assert wait_for(lambda: engine_metrics(llm_server.url)["waiting"] == 0, 30)
    assert wait_for(lambda: client.admit("alice")[0], 15), client.status()
    assert client.status()["load"] <= 0.3
    client.close()
