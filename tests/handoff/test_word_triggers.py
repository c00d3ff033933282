"""The triggers a message's own words start (issue 57, item 2): a legal threat, anger, a complaint about the previous
answer, in English and Chinese, over the real /api/v1 in-process. Each answers route handoff with the conversation
queued for a person, its trigger and reason stored; each is switched off by its own setting; messages that only
sound like one (the law, a polite delivery complaint, mild frustration) are not handed over. No LLM: the shipped
rules decide before any answer."""

from __future__ import annotations

import pytest

from tests.api import api_client
from tests.conftest import fresh_db, make_runtime

pytestmark = pytest.mark.slow

CASES = [  # (message, trigger, rule)
    ("Sort out my refund this week or I'm going to sue", "legal", "legal-threat"),
    ("你们再不退款我就去法院告你们", "legal", "legal-threat"),
    ("this is ridiculous, I want compensation beyond the refund", "anger", "anger"),
    ("太过分了，东西坏了还没人管", "anger", "anger"),
    ("your last answer was wrong, I asked about the exchange", "complaint", "complaint-about-answer"),
    ("答非所问，我问的是换货", "complaint", "complaint-about-answer"),
]
NOT_A_PERSON = ["What is the legal age to buy candles?", "Does the EU have a law on refunds?",
                "My parcel is a few days late, how long does standard delivery take?",
                "could I talk about an order I placed?", "argh, locked out of my account again, how do I get back in?",
                "欧盟有退款相关的法律吗？", "包裹晚到了，一般要几天？"]


@pytest.fixture(scope="module")
def served(settings, demo_kb, tmp_path_factory):
    runtime = make_runtime(settings, fresh_db(tmp_path_factory.mktemp("words")), demo_kb)
    try:
        with api_client(settings, runtime) as client:
            yield client, runtime
    finally:
        runtime.close()


@pytest.mark.parametrize(("message", "trigger", "rule"), CASES, ids=[c[0][:30] for c in CASES])
def test_the_message_starts_a_handoff_with_its_trigger_and_reason_stored(served, message, trigger, rule):
    client, runtime = served
    reply = client.post("/api/v1/chat", json={"message": message})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["route"] == "handoff", body
    assert body["handoff"]["status"] == "waiting" and body["handoff"]["trigger"] == trigger
    state = runtime.service.conversations.state(body["session_id"])
    assert (state.status, state.trigger) == ("waiting", trigger)
    assert state.reason.startswith(f"rule {rule}: ") and "a person handles it" in state.reason
    event = runtime.service.conversations.events(body["session_id"])[-1]
    assert (event.to_status, event.reason) == ("waiting", state.reason)  # the change is stored with why


@pytest.mark.parametrize("message", NOT_A_PERSON)
def test_a_message_that_only_sounds_like_one_is_not_handed_over(served, message):
    client, runtime = served
    body = client.post("/api/v1/chat", json={"message": message}).json()
    state = runtime.service.conversations.state(body["session_id"])
    assert (body["route"], state.status) != ("handoff", "waiting") and state.status == "bot", (state.trigger,
                                                                                               state.reason)


@pytest.mark.parametrize(("switch", "message"), [("handoff_on_legal", CASES[0][0]), ("handoff_on_anger", CASES[2][0]),
                                                 ("handoff_on_complaint", CASES[5][0])])
def test_each_trigger_is_switched_off_by_its_own_setting(settings, demo_kb, tmp_path, switch, message):
    runtime = make_runtime(settings.model_copy(update={switch: False}), fresh_db(tmp_path), demo_kb)
    try:
        with api_client(settings, runtime) as client:
            body = client.post("/api/v1/chat", json={"message": message}).json()
        state = runtime.service.conversations.state(body["session_id"])
        assert body["route"] != "handoff" and state.status == "bot", (body["route"], state.trigger)
    finally:
        runtime.close()
