"""The answer-check trigger: an LLM answer that fails its checks and would end as the offer of a person ("press Talk
to a human") queues the conversation for a person instead, with the handoff packet (the rejected text and what the
check found); switched off, the offer stays. The failing answer comes from a FAKE scripted OpenAI server (a real
model cannot be made to copy a help-center answer on demand); the chain, database and KB are real."""

from __future__ import annotations

import pytest

from chains import answers
from chains.schema import ChatRequest
from core.pii import mask
from core.policy import Thresholds
from tests.conftest import fresh_db, make_runtime
from tests.fakes import ScriptedOpenAIServer

pytestmark = pytest.mark.slow
TOWELS = "my sister says your towels are the softest she has owned, is that true?"  # out of scope for the KB


@pytest.fixture(params=[True, False], ids=["trigger-on", "trigger-off"])
def scripted(request, settings, demo_kb, tmp_path):
    with ScriptedOpenAIServer() as server:
        runtime = make_runtime(settings.model_copy(update={
            "llm_url": server.url, "llm_model": "scripted", "llm_retries": 0, "cache_replaced_answers": False,
            "handoff_on_answer_check": request.param}), fresh_db(tmp_path), demo_kb, use_llm=True)
        runtime.policy.save({"route_threshold": 0.0}, "test", "every message to the LLM")
        try:
            yield server, runtime, request.param
        finally:
            runtime.policy.save({"route_threshold": Thresholds.defaults(settings).route_threshold}, "test", "default")
            runtime.close()


def test_an_answer_that_would_offer_a_person_queues_the_conversation_for_one_instead(scripted, demo_kb):
    server, runtime, on = scripted
    nearest = demo_kb.search(TOWELS)[0].answer
    server.say(nearest)  # the model copies the nearest help-center answer, which the router found not to fit
    response = runtime.service.answer(ChatRequest(message=TOWELS, session_id="towels-1", channel="api"))
    assert response.served == "human_offer", response.reasons  # what the chain decided, kept in the log
    state = runtime.service.conversations.state("towels-1")
    if not on:
        assert response.answer == answers.NOTICES["en"].no_answer and response.handoff is None
        assert state.status == "bot"
        return
    assert response.answer == answers.NOTICES["en"].handoff  # a colleague replies here, no button to press
    assert response.handoff is not None and response.handoff["status"] == "waiting" and response.handoff["triggered"]
    assert (state.status, state.trigger, state.request_id) == ("waiting", "answer_check", response.request_id)
    assert "copied" in state.reason
    packet = state.packet
    assert packet["unsent"] and packet["rejected"]["text"] == mask(nearest)  # masked like the request log
    assert "copied" in {f["kind"] for f in packet["rejected"]["findings"]}
    assert packet["passages"] and all("score" in p for p in packet["passages"])


@pytest.mark.parametrize(("again", "trigger"), [("How do I reset my password?", "repeat"),
                                               ("that didn't help", "complaint"), ("没用", "complaint")])
def test_a_customer_not_helped_by_the_answer_is_queued_for_a_person(settings, demo_kb, tmp_path, again, trigger):
    """Asking the same again (the repeat trigger, switched on here) or saying the answer did not help (the
    complaint-about-answer rule, on by default)."""
    runtime = make_runtime(settings.model_copy(update={"handoff_on_repeat": True}), fresh_db(tmp_path), demo_kb)
    try:
        first = runtime.service.answer(ChatRequest(message="How do I reset my password?", session_id="again-1",
                                                   channel="api"))
        assert first.handoff is None and "password" in first.answer.lower()
        second = runtime.service.answer(ChatRequest(message=again, session_id="again-1", channel="api"))
        state = runtime.service.conversations.state("again-1")
        assert (state.status, state.trigger) == ("waiting", trigger)
        assert second.handoff is not None and second.handoff["triggered"]
        # a colleague replies here, in the customer's language, instead of the bot answering once more
        assert second.answer == answers.NOTICES["zh" if again == "没用" else "en"].handoff
    finally:
        runtime.close()
