"""Waiting costs no time (issue 57): a question whose LLM answer failed its checks before, and whose replacement
the chain remembered, gets the offer of a person (a colleague replies here, with the waiting line) at once, and the
LLM's text is still written in the background as an unsent suggestion in the handoff packet. Real vLLM, KB, cache
and database. The first customer's remembered replacement is stored as the chain stores one (origin "replaced"), so
the test does not depend on the real model failing this answer again."""

from __future__ import annotations

import time

import pytest

from chains import answers
from chains.schema import ChatRequest
from tests.conftest import fresh_db, make_runtime

pytestmark = pytest.mark.slow
QUESTION = "which of your lamps would be nicest in a reading nook?"


def test_a_remembered_replacement_offers_a_person_at_once_and_the_llm_writes_a_suggestion_behind_it(
        llm_settings, demo_kb, tmp_path):
    runtime = make_runtime(llm_settings.model_copy(update={"cache_replaced_answers": True}), fresh_db(tmp_path),
                           demo_kb, use_llm=True)
    try:
        chain = runtime.chain
        namespace = chain.cache_namespace(ChatRequest(message=QUESTION), runtime.policy.current())
        chain.cache.store(QUESTION, chain.embed(QUESTION), namespace, {
            "answer": answers.NOTICES["en"].no_answer, "sources": [], "origin": "replaced", "served": "human_offer"})
        started = time.perf_counter()
        response = runtime.service.answer(ChatRequest(message=QUESTION, session_id="second-customer", channel="api"))
        took = time.perf_counter() - started
        assert response.route == "cache" and response.served == "human_offer", response.reasons
        assert response.answer == answers.NOTICES["en"].handoff  # a colleague replies here
        assert response.handoff is not None and response.handoff["status"] == "waiting"
        assert took < 2.0, f"the offer took {took:.2f} s"
        conversations = runtime.service.conversations
        assert "background" not in conversations.state("second-customer").packet  # the LLM was not waited for
        deadline, packet = time.monotonic() + 180, {}
        while time.monotonic() < deadline and "background" not in packet:
            time.sleep(0.5)
            packet = conversations.state("second-customer").packet
        suggestion = packet.get("background")
        assert suggestion is not None, runtime.service.last_log_error
        assert suggestion["unsent"] and suggestion["text"] and suggestion["model"]
        assert isinstance(suggestion["findings"], list)
        inbox = {c["session_id"]: c for c in conversations.inbox()}
        assert inbox["second-customer"]["packet"]["background"]["text"] == suggestion["text"]
    finally:
        runtime.close()
