"""The answer check in the chain: unsupported links, prices and phones, truncation, repetition and the wrong language
are caught and handled by the operator's policy, streamed and not. Invented claims come from a FAKE scripted
OpenAI server (a real model cannot be made to invent on demand); false positives are measured on the real vLLM."""

from __future__ import annotations

import itertools
import re
import threading

import pytest
from sqlmodel import select

from chains import answers
from chains.check import AnswerCheck, StreamChecker, claims, sources_of
from chains.schema import ChatRequest, ChatResponse, Revised
from core.policy import Thresholds
from storage.tables import Handoff, RequestLog
from tests.conftest import make_runtime
from tests.fakes import ScriptedOpenAIServer

pytestmark = pytest.mark.slow

SHIPPING = "how much does shipping cost"


@pytest.fixture
def scripted(settings, db, demo_kb):
    with ScriptedOpenAIServer() as server:
        # Each path must reach the (scripted) LLM: a replaced answer is not remembered for the second one.
        runtime = make_runtime(settings.model_copy(update={"llm_url": server.url, "llm_model": "scripted",
                                                           "llm_retries": 0, "cache_replaced_answers": False}),
                               db, demo_kb, use_llm=True)
        runtime.policy.save({"route_threshold": 0.0}, "test", "every message to the LLM")
        try:
            yield server, runtime
        finally:
            runtime.policy.save({"route_threshold": Thresholds.defaults(settings).route_threshold}, "test", "default")
            runtime.close()


def both_paths(runtime, text: str, session: str) -> tuple[ChatResponse, list[str], ChatResponse]:
    """The same message streamed (pieces as shown, a replacement as its text) and answered whole."""
    items = list(runtime.service.stream(ChatRequest(message=text, session_id=session + "-s", channel="api")))
    streamed = items[-1]
    pieces = [i.text if isinstance(i, Revised) else i for i in items if isinstance(i, str | Revised)]
    whole = runtime.service.answer(ChatRequest(message=text, session_id=session + "-w", channel="api"))
    return streamed, pieces, whole


def row(runtime, request_id) -> RequestLog:
    with runtime.db.session() as session:
        return session.get(RequestLog, request_id)


def test_an_invented_link_and_phone_are_removed_in_both_paths(scripted):
    server, runtime = scripted
    text = ("Standard shipping costs $4.90. See https://www.northwind-deals.com/shipping for express shipping. "
            "Call 1-800-555-0199 for help.")
    server.say(text).say(text)
    streamed, pieces, whole = both_paths(runtime, SHIPPING, "link")
    for response in (streamed, whole):
        assert response.route == "llm"
        assert "northwind-deals" not in response.answer and "555-0199" not in response.answer
        assert "$4.90" in response.answer and "our website" in response.answer  # supported claim kept
        logged = row(runtime, response.request_id)
        kinds = {(f["kind"], f["action"]) for f in logged.findings}
        assert kinds == {("url", "remove"), ("phone", "remove")}
        assert any(step["stage"] == "check" for step in logged.trace)
    assert pieces == [streamed.answer]  # held until checked (the default): shown once, as checked
    assert not any("northwind-deals" in p or "555-0199" in p for p in pieces)


def test_an_invented_price_is_never_shown_and_the_draft_answers(scripted):
    server, runtime = scripted
    # The first sentence is the help center's own words: the answer is stopped by the invented price, nothing else
    text = "Shipping within the EU is standard. Express shipping costs only $2.50 today! Anything else?"
    server.say(text).say(text)
    streamed, pieces, whole = both_paths(runtime, SHIPPING, "price")
    assert not any("2.50" in p for p in pieces)  # never on screen, not even for a moment
    for response in (streamed, whole):
        assert "2.50" not in response.answer and answers.UNCONFIRMED_NOTICE in response.answer
        assert "$9.90" in response.answer  # the help center's own figure, from the draft
        assert row(runtime, response.request_id).findings[0]["kind"] == "amount"
    assert pieces[-1] == streamed.answer  # the answer replaced what was shown, and what replaced it was logged


def test_a_cut_off_and_repeating_answer_is_replaced_whole_never_served_trimmed(scripted):
    server, runtime = scripted
    server.say("Standard shipping costs $4.90.\nStandard shipping costs $4.90.\nExpress costs $9.90 and it is", "length")
    response = runtime.service.answer(ChatRequest(message=SHIPPING, channel="api"))
    assert "Standard shipping costs $4.90.\nStandard" not in response.answer and "and it is" not in response.answer
    assert response.answer.startswith(answers.UNCONFIRMED_NOTICE)  # the draft fits a shipping question: it answers
    logged = row(runtime, response.request_id)
    assert {"truncated", "repeated"} <= {f["kind"] for f in logged.findings}


def test_an_answer_that_narrates_in_its_first_sentence_is_stopped_there_and_replaced_unless_stopping_is_off(
        scripted, settings, db, demo_kb):
    server, runtime = scripted
    tail = " ".join(["Standard shipping costs $4.90 within the EU."] * 20) + " LASTWORD"
    text = "The customer is asking how much shipping costs. " + tail
    server.say(text).say(text)
    streamed, pieces, whole = both_paths(runtime, SHIPPING, "narrates")
    for response in (streamed, whole):
        logged = row(runtime, response.request_id)
        assert "customer is asking" not in response.answer and logged.served in ("draft_with_caveat", "human_offer")
        assert response.served == logged.served  # the customer's badge says what the answer is, not only its route
        found = [f for f in logged.findings if f["kind"] == "narration"]
        assert found and found[0]["detail"].endswith("generation stopped")
        # The chain stopped reading the stream once the first sentence settled it: the rest never arrived.
        # (at most a word more: the first sentence counts as finished once the space after its full stop arrives)
        assert logged.rejected_text.startswith("The customer is asking") and "4.90" not in logged.rejected_text
    assert not any("customer is asking" in p for p in pieces)
    # TANDEM_LLM_STOP_WHEN_BROKEN=false: the same answer is written to its end, then replaced
    whole_runtime = make_runtime(settings.model_copy(update={
        "llm_url": server.url, "llm_model": "scripted", "llm_retries": 0, "cache_replaced_answers": False,
        "llm_stop_when_broken": False}), db, demo_kb, use_llm=True)
    try:
        server.say(text)
        replaced = whole_runtime.service.answer(ChatRequest(message=SHIPPING, session_id="narrates-off",
                                                            channel="api"))
        assert "LASTWORD" in row(whole_runtime, replaced.request_id).rejected_text
        assert row(whole_runtime, replaced.request_id).served == logged.served
    finally:
        whole_runtime.close()


def test_an_answer_in_the_wrong_language_is_replaced_with_the_draft_and_a_notice_in_the_right_one(scripted):
    server, runtime = scripted
    server.say("Shipping costs $4.90 in the EU.")
    response = runtime.service.answer(ChatRequest(message="运费多少钱？", channel="api"))
    assert f"{answers.NOTICES['zh'].unconfirmed}\n\n欧盟境内" in response.answer  # said in the customer's language
    assert "language" in {f["kind"] for f in row(runtime, response.request_id).findings}


def test_the_operators_policy_can_hand_off_instead(scripted):
    server, runtime = scripted
    actions = {**runtime.policy.current().check_actions, "amount": "handoff"}
    runtime.policy.save({"check_actions": actions}, "test", "a human checks invented prices")
    try:
        server.say("Express shipping costs only $2.50 today.")
        response = runtime.service.answer(ChatRequest(message=SHIPPING, session_id="handoff-1", channel="api"))
    finally:
        runtime.policy.save({"check_actions": {**actions, "amount": "draft"}}, "test", "back to the default")
    assert response.answer.endswith(answers.HANDOFF_NOTICE) and "2.50" not in response.answer
    with runtime.db.session() as session:
        handoffs = session.exec(select(Handoff).where(Handoff.session_id == "handoff-1")).all()
    assert len(handoffs) == 1 and "amount" in handoffs[0].note


def test_a_help_center_answer_copied_whole_is_replaced_only_where_the_router_found_none_fits(scripted, demo_kb):
    server, runtime = scripted
    # Out of scope: the router finds no help-center answer fits, and the model copies the nearest one word for word
    towels = "my sister says your towels are the softest she has owned, is that true?"
    nearest = demo_kb.search(towels)[0].answer
    server.say(nearest)
    replaced = runtime.service.answer(ChatRequest(message=towels, session_id="copied-1", channel="api"))
    logged = row(runtime, replaced.request_id)
    assert logged.served == "human_offer" and nearest not in replaced.answer, logged.reasons
    assert "copied" in {f["kind"] for f in logged.findings} and logged.rejected_text == nearest
    # In scope (the route threshold is 0 here, but the router's own would keep it on the KB): a copy is the answer
    shipping = demo_kb.search(SHIPPING)[0].answer
    server.say(shipping)
    kept = runtime.service.answer(ChatRequest(message=SHIPPING, session_id="copied-2", channel="api"))
    assert kept.route == "llm" and row(runtime, kept.request_id).served == "llm" and shipping in kept.answer


def test_the_check_is_counted_in_prometheus(scripted):
    from prometheus_client import REGISTRY

    server, runtime = scripted
    before = REGISTRY.get_sample_value("tandem_check_findings_total", {"kind": "email", "action": "remove"}) or 0
    server.say("Write to deals@northwind-offers.com for a discount.")
    runtime.service.answer(ChatRequest(message=SHIPPING, channel="api"))
    after = REGISTRY.get_sample_value("tandem_check_findings_total", {"kind": "email", "action": "remove"})
    assert after == before + 1


def _independently_supported(context: str, text: str) -> list:
    """An independent test of "comes from the context": the claim, as the answer wrote it, appears in the context
    as a whole phrase ("24 hours" is not supported by "24 months", nor "2 months" by "12 months")."""
    return [claim for claim in claims(text)
            if re.search(rf"(?<![\w.]){re.escape(claim.text.lower())}(?!\w)", context.lower())]


def test_supported_claims_in_real_llm_answers_are_kept(llm_client, demo_kb):
    """False positives on real vLLM answers: each rewrites one help-center answer, so its claims come from it.
    Asks until 100 supported claims have been seen (at most 320 calls, 4 at a time, so vLLM batches them). Only
    the answers with three or more claims are asked (10 of the 41 English ones with any): the test's time is most
    of it SmolLM2 generating, and on an AVX2 machine in float32 they needed 175 calls (251 s) where the answers
    with two or more needed 192 (286 s)."""
    answers = [e["answer"] for e in demo_kb.entries()
               if len(claims(e["answer"])) >= 3 and not e["answer_id"].startswith("zh_")]
    prompts = [(answer, [{"role": "system", "content": "Rewrite the help-center text for a customer. Keep every "
                          "number, link and email exactly as written."},
                         {"role": "user", "content": answer}]) for answer in answers]
    wanted, most_calls = 100, 320
    calls = itertools.count()
    supported: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def ask():
        while True:
            with lock:
                if len(supported) >= wanted:
                    return
                index = next(calls)
            if index >= most_calls:
                return
            context, messages = prompts[index % len(prompts)]
            text = llm_client.complete(messages, max_tokens=64, temperature=0.7).text
            check = AnswerCheck(sources_of([], "", "", []) + [context], "")
            unsupported = check.unsupported(text)
            with lock:
                supported.extend((claim.text, claim in unsupported) for claim in _independently_supported(context, text))

    workers = [threading.Thread(target=ask) for _ in range(4)]  # the client's in-flight limit
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(supported) >= wanted, f"only {len(supported)} supported claims in {most_calls} answers"
    flagged = [text for text, was_flagged in supported if was_flagged]
    assert len(flagged) / len(supported) <= 0.02, (flagged, len(supported))


def test_streaming_holds_back_only_what_may_be_a_claim():
    check = AnswerCheck(["Returns are accepted within 30 days."], "can I return it")
    stream = StreamChecker(check)
    shown = [stream.feed(p) for p in ("You ", "can ", "return ", "it ", "within ", "30 ", "days. ", "Great ", "day ")]
    assert shown[0] == "You " and shown[1] == "can "  # plain words pass at once
    assert shown[5] == "" and "30 days." in shown[6]  # the sentence with a number waits for its end
    assert "".join(shown) + stream.close() == "You can return it within 30 days. Great day "


def test_a_rewrite_that_misses_the_question_of_a_draft_that_misses_it_too_is_replaced_by_a_person(settings, db, demo_kb):
    """The demo case of issue 57: "do you have a blue throw blanket under $50?" has a weak draft (a rewrite), and the
    FAKE scripted model rewrites it as the student discount (the real model cannot be made to on demand). The rewrite
    names no price, so it is rejected, and its draft does not answer the question either: the offer of a person
    (with the handoff core, a colleague replies here) replaces both, never the draft. The small tier's question
    "which one?" is off here: at the default margin this message gets it instead of the rewrite (its best two
    answers are 0.002 apart), and the catalog, on in the product, answers it first (tests/catalog)."""
    blanket = "do you have a blue throw blanket under $50?"
    with ScriptedOpenAIServer() as server:
        runtime = make_runtime(settings.model_copy(update={"llm_url": server.url, "llm_model": "scripted",
                                                           "llm_retries": 0, "cache_replaced_answers": False,
                                                           "clarify_margin": 0.0}),
                               db, demo_kb, use_llm=True)
        runtime.policy.save({"route_threshold": 1.0}, "test", "nothing to the LLM but rewrites")
        try:
            server.say("Yes, students get 10% off with Northwind Student, applied automatically at checkout for 12 "
                       "months.")
            response = runtime.service.answer(ChatRequest(message=blanket, session_id="blanket-1", channel="api"))
        finally:
            runtime.policy.save({"route_threshold": Thresholds.defaults(settings).route_threshold}, "test", "default")
            runtime.close()
    assert response.route == "llm" and response.served == "human_offer", response.reasons
    assert any("rewrite" in step["stage"] for step in response.trace)
    assert any(r.startswith("rewrite rejected (unanswered: the question names a price (under $50)")
               for r in response.reasons), response.reasons
    assert "students" not in response.answer and response.answer in (answers.NOTICES["en"].no_answer,
                                                                       answers.NOTICES["en"].handoff)
