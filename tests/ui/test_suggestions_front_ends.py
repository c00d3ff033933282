"""Suggested replies (predicted follow-ups) through every front end of a real `tandem serve` (its own data directory,
the demo KB, MiniLM; an LLM tier at a closed port, as no answer here needs one): after enough conversations in its
log, the HTTP API and /v1 return the suggestions, the Gradio chat shows them as buttons, and a button is answered
from its KB answer and logged as a click. The small tier's question "which one?" travels the same way: buttons in
the Gradio chat, and over /v1 a choice's number typed back is answered from that choice."""

from __future__ import annotations

import time

import httpx
import pytest

from storage.tables import RequestLog
from tests.apps import GRADIO_CLIENT_HTTPX, serving

pytestmark = pytest.mark.slow

JOURNEY = ["How do I track my order?", "Can I change my order?", "How do I cancel my order?"]
SESSIONS = 11  # 22 follow-ups: over the 20 the model waits for (chains.followups.MIN_TRANSITIONS)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("suggest-home"), TANDEM_FOLLOWUPS_REFIT_S="1") as running:
        yield running


@pytest.fixture(scope="module")
def api(app):
    with httpx.Client(base_url=app.url, timeout=120) as client:
        for _ in range(SESSIONS):
            session = ""
            for text in JOURNEY:
                session = client.post("/api/v1/chat", json={"message": text, "session_id": session}).json()["session_id"]
        yield client


def _suggested_after_tracking(api) -> dict:
    """Ask until the app's background refit (every second here) has learned the log's conversations."""
    deadline = time.monotonic() + 60
    while True:
        answer = api.post("/api/v1/chat", json={"message": JOURNEY[0]}).json()
        if answer.get("suggestions") or time.monotonic() > deadline:
            return answer
        time.sleep(1)


def test_http_api_returns_the_learned_next_answer_as_a_suggestion_and_answers_a_click(app, api):
    answer = _suggested_after_tracking(api)
    assert [s["answer_id"] for s in answer.get("suggestions", [])][:1] == ["change_order"]
    clicked = api.post("/api/v1/chat", json={"message": answer["suggestions"][0]["title"],
                                             "session_id": answer["session_id"], "suggestion": "change_order"}).json()
    assert clicked["route"] == "small" and [s["answer_id"] for s in clicked["sources"]] == ["change_order"]
    with app.db.session() as session:
        row = session.get(RequestLog, clicked["request_id"])
    assert row is not None and any(s["stage"] == "suggest" and s["decision"] == "clicked" for s in row.trace)


def test_openai_endpoint_carries_the_suggestions_in_its_tandem_block(app, api):
    import openai

    _suggested_after_tracking(api)
    client = openai.OpenAI(base_url=app.url + "/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(model="tandem", messages=[{"role": "user", "content": JOURNEY[0]}])
    assert [s["answer_id"] for s in reply.model_dump()["tandem"]["suggestions"]][:1] == ["change_order"]


def test_gradio_chat_shows_suggestions_as_buttons_and_a_button_answers_from_the_kb(app, api):
    from gradio_client import Client

    _suggested_after_tracking(api)
    gradio = Client(app.url + "/", verbose=False, httpx_kwargs=GRADIO_CLIENT_HTTPX)
    history, _box, details = gradio.predict({"text": JOURNEY[0], "files": []}, api_name="/chat")
    buttons = history[-1]["options"]
    assert buttons[0] == {"label": "Can I change my order?", "value": "suggested:change_order"}
    history, _box, details = gradio.predict(buttons[0]["value"], history, api_name="/choose")
    assert details["route"] == "small" and [s["answer_id"] for s in details["sources"]] == ["change_order"]
    assert history[-2]["role"] == "user" and "Can I change my order?" in str(history[-2]["content"])


# The small tier's question "which one?" (chains/tiers/small.py) travels as suggestions too: its two best answers on
# the demo KB are 0.04 apart (how long shipping takes, how to cancel an order).
AMBIGUOUS = "undo purchase before dispatch"


def test_the_question_which_one_is_buttons_in_the_gradio_chat_and_a_button_answers_it(app):
    from gradio_client import Client

    gradio = Client(app.url + "/", verbose=False, httpx_kwargs=GRADIO_CLIENT_HTTPX)
    history, _box, details = gradio.predict({"text": AMBIGUOUS, "files": []}, api_name="/chat")
    assert details["served"] == "clarify" and details["sources"] == [], details
    values = [button["value"] for button in history[-1]["options"]]
    assert "suggested:cancel_order" in values and len(values) >= 2, values
    history, _box, details = gradio.predict("suggested:cancel_order", history, api_name="/choose")
    assert details["route"] == "small" and [s["answer_id"] for s in details["sources"]] == ["cancel_order"]


def test_over_v1_the_choices_number_typed_back_is_answered_from_that_choice(app):
    import openai

    client = openai.OpenAI(base_url=app.url + "/v1", api_key="unused", max_retries=0)
    asked = client.chat.completions.create(model="tandem", messages=[{"role": "user", "content": AMBIGUOUS}])
    question = asked.choices[0].message.content or ""
    choices = [s["answer_id"] for s in asked.model_dump()["tandem"]["suggestions"]]
    number = choices.index("cancel_order") + 1
    assert asked.model_dump()["tandem"]["served"] == "clarify" and f"\n{number}. " in question, question
    picked = client.chat.completions.create(model="tandem", messages=[
        {"role": "user", "content": AMBIGUOUS}, {"role": "assistant", "content": question},
        {"role": "user", "content": str(number)}])
    tandem = picked.model_dump()["tandem"]
    assert tandem["served"] == "draft" and [s["answer_id"] for s in tandem["sources"]] == ["cancel_order"], tandem
