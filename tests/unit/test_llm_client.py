"""Client behaviour that needs no model: input checks, real connection failures, breaker, admission."""

from __future__ import annotations

import importlib
import time

import pytest

from chains.llm.breaker import BreakerState
from chains.llm.client import LLMClient, LLMUnavailable
from chains.llm.server import free_port
from tandem.settings import reset_settings

MESSAGES = [{"role": "user", "content": "Where is my order?"}]


@pytest.fixture
def dead_endpoint(monkeypatch):
    """An endpoint nobody listens on: connection refused is a real fault, produced for real."""
    monkeypatch.setenv("TANDEM_LLM_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("TANDEM_LLM_MODEL", "test-model")
    monkeypatch.setenv("TANDEM_LLM_RETRIES", "2")
    monkeypatch.setenv("TANDEM_BREAKER_FAILURES", "3")
    reset_settings()
    yield
    monkeypatch.undo()
    reset_settings()


@pytest.mark.parametrize("messages", [[], "hi", [{"role": "robot", "content": "x"}], [{"role": "user"}]])
def test_bad_messages_are_a_clear_value_error(messages):
    with pytest.raises(ValueError, match="message"):
        LLMClient(poll_metrics=False).complete(messages)


def test_bad_max_tokens_and_score_are_clear_errors():
    client = LLMClient(poll_metrics=False)
    with pytest.raises(ValueError, match="max_tokens"):
        client.complete(MESSAGES, max_tokens=0)
    with pytest.raises(ValueError, match="score"):
        client.complete(MESSAGES, score=1.5)


def test_refused_connection_retries_then_opens_the_breaker_and_rejects_fast(dead_endpoint):
    waits: list[float] = []
    client = LLMClient(sleep=waits.append, poll_metrics=False)
    with pytest.raises(LLMUnavailable, match="after 3 tries") as info:
        client.complete(MESSAGES, max_tokens=4)
    assert "connection" in info.value.reason
    assert len(waits) == 2 and waits[0] < waits[1] * 1.5 + 0.5  # backoff grows (jitter allowed)
    assert client.status()["breaker"] == BreakerState.OPEN.value
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match="breaker open"):
        client.complete(MESSAGES, max_tokens=4)
    assert client.status()["tiers"][0]["error_rate"] > 0
    assert time.monotonic() - started < 1.0  # rejected without touching the network


def test_overload_degrades_normal_users_but_not_vips(monkeypatch, dead_endpoint):
    monkeypatch.setenv("TANDEM_VIP_USERS", "vip-1, vip-2")
    reset_settings()
    client = LLMClient(poll_metrics=False)
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
