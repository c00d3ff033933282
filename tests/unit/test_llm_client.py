"""Client behaviour that needs no model: input checks, real connection failures, breaker, admission."""

from __future__ import annotations

import importlib
import socket

import pytest

from chains.llm.breaker import BreakerState
from chains.llm.client import LLMClient, LLMUnavailable, _classify
from tandem.processes import free_port

MESSAGES = [{"role": "user", "content": "Where is my order?"}]


@pytest.fixture
def dead(settings):
    """Settings for an endpoint nobody listens on: connection refused is a real fault, produced for real."""
    return settings.model_copy(update={"llm_url": f"http://127.0.0.1:{free_port()}/v1", "llm_model": "test-model",
                                       "llm_retries": 2, "breaker_failures": 3})


@pytest.mark.parametrize("messages", [[], "hi", [{"role": "robot", "content": "x"}], [{"role": "user"}]])
def test_bad_messages_are_a_clear_value_error(messages, settings):
    with pytest.raises(ValueError, match="message"):
        LLMClient(settings, poll_metrics=False).complete(messages)


def test_bad_max_tokens_and_score_are_clear_errors(settings):
    client = LLMClient(settings, poll_metrics=False)
    with pytest.raises(ValueError, match="max_tokens"):
        client.complete(MESSAGES, max_tokens=0)
    with pytest.raises(ValueError, match="score"):
        client.complete(MESSAGES, score=1.5)


def test_refused_connection_retries_with_doubling_backoff_then_opens_the_breaker(dead):
    waits: list[float] = []
    client = LLMClient(dead, sleep=waits.append, jitter=lambda low, high: 1.0, poll_metrics=False)
    with pytest.raises(LLMUnavailable, match="after 3 tries") as info:
        client.complete(MESSAGES, max_tokens=4)
    assert "connection" in info.value.reason
    assert waits == [0.25, 0.5]  # exponential: a constant backoff would fail this
    assert client.status()["breaker"] == BreakerState.OPEN.value
    port = int(dead.llm_url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_server(("127.0.0.1", port)) as listener:  # someone listens now: a try would connect here
        listener.setblocking(False)
        with pytest.raises(LLMUnavailable, match="breaker open"):
            client.complete(MESSAGES, max_tokens=4)
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection came: rejected without touching the network
    assert waits == [0.25, 0.5]  # and without another backoff
    assert client.status()["tiers"][0]["error_rate"] > 0


def test_a_fault_on_our_side_is_not_retried_and_not_counted_against_the_server():
    """Unknown exceptions used to be retried and counted as 'server down' by the breaker."""
    kind, retryable, server = _classify(KeyError("choices"))
    assert (kind, retryable, server) == ("other", False, "ours")
    import httpx

    assert _classify(httpx.ConnectError("refused"))[1:] == (True, "down")


def test_overload_degrades_normal_users_but_not_vips(dead):
    client = LLMClient(dead.model_copy(update={"vip_users": "vip-1, vip-2"}), poll_metrics=False)
    tracker = client._endpoint(client._select(None)).tracker
    assert client.admit("alice")[0]
    taken = [tracker.acquire(0) for _ in range(tracker.capacity)]  # every slot busy: load 1.0
    admitted, reason = client.admit("alice")
    assert not admitted and "overloaded" in reason and "small tier" in reason
    assert client.admit("vip-2") == (True, "VIP user: LLM kept under load")
    for _ in taken:
        tracker.release(ok=True)
    assert client.admit("alice")[0]
    assert client.status()["overloaded"] is False


def test_metrics_survive_reimport():
    from chains.llm import telemetry

    before = telemetry.LLM_REQUESTS
    reloaded = importlib.reload(telemetry)
    assert reloaded.LLM_REQUESTS is before
