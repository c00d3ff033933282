"""LLM faults: server killed, too slow, answering 500, answering malformed JSON.

Expected (SECURITY.md, fault model): every message is still answered, from the knowledge base, with the
honest fallback notice (route small, fallback true); the circuit breaker opens so later messages do not
wait on a dead endpoint; and every message leaves exactly one request row.
"""

from __future__ import annotations

import pytest

from chains.answers import notices
from chains.schema import ChatRequest
from core.policy import Thresholds
from tests.fakes import FaultyOpenAIServer
from tests.reliability.conftest import make_service, session_rows

pytestmark = pytest.mark.slow

# Open-ended requests the router sends to the LLM (or to an LLM rewrite) rather than the KB draft.
LLM_BOUND = ("Write me a short poem about my parcel that is late and the rain in Paris",
             "Can you compare your return policy with Amazon's and explain which is fairer and why?",
             "My grandmother wants to know if your mugs are microwave safe and how to stack them",
             "Explain in detail why my refund might take longer during holidays than other weeks",
             "I am planning a surprise party; which of your products make good gifts under 50 dollars?",
             "请比较一下你们和亚马逊的退货政策，哪个更公平？为什么？")  # the notice is in the customer's language


def _run_fault(settings, db, small_kb, url: str, timeout_s: float = 5.0) -> tuple[list, dict]:
    from chains.llm.client import LLMClient

    faulty = settings.model_copy(update={"llm_url": url, "llm_retries": 1, "llm_timeout_s": timeout_s,
                                         "llm_model": "smollm2"})
    client = LLMClient(faulty, poll_metrics=False)
    service = make_service(faulty, db, small_kb, client)
    service.policy.save({"route_threshold": 0.0}, "test", "every message to the LLM")
    try:
        before = session_rows(db)
        responses = [service.answer(ChatRequest(message=m, channel="api")) for m in LLM_BOUND]
        added = session_rows(db) - before
        status = client.status()
    finally:
        service.policy.save({"route_threshold": Thresholds.defaults(settings).route_threshold}, "test", "default")
        client.close()
    for message, response in zip(LLM_BOUND, responses):
        assert response.route == "small" and response.fallback, (response.route, response.reasons)
        assert response.answer.startswith(notices(message).fallback), response.answer
    assert added == len(LLM_BOUND), f"{len(LLM_BOUND)} sent, {added} rows"
    assert status["breaker"] == "open", status["breaker"]
    return responses, status


@pytest.mark.parametrize("mode", ["500", "malformed"])
def test_llm_answering_garbage_falls_back_and_opens_the_breaker(settings, db, small_kb, mode):
    with FaultyOpenAIServer(mode) as faulty:
        responses, _ = _run_fault(settings, db, small_kb, faulty.url)
    # The breaker stops the calls: fewer server hits than messages x tries.
    assert 0 < faulty.hits < len(LLM_BOUND) * 2
    assert any("breaker open" in r.reasons[-1] for r in responses)


def test_llm_too_slow_times_out_and_falls_back(settings, db, small_kb, llm_server):
    responses, _ = _run_fault(settings, db, small_kb, llm_server.url, timeout_s=0.01)
    assert "timeout" in responses[0].reasons[-1]


def test_llm_server_killed_falls_back(settings, db, small_kb, killed_llm_server):
    responses, _ = _run_fault(settings, db, small_kb, killed_llm_server.url)
    assert "connection" in responses[0].reasons[-1]
