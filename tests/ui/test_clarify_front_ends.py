"""A clarification through every front end of a real `tandem serve` with TANDEM_CLARIFY=on (its own data directory,
the demo KB, MiniLM; an LLM tier at a closed port, as no answer here needs one): the HTTP API and /v1 give the
options in the reply and answer a choice from the KB, and the Gradio chat shows them as buttons on the message."""

from __future__ import annotations

import httpx
import pytest
from sqlmodel import select

from storage.tables import Feedback, RequestLog
from tests.apps import GRADIO_CLIENT_HTTPX, serving

pytestmark = pytest.mark.slow

AMBIGUOUS = "how long"  # warranty or shipping: tests/integration/test_clarify.py
OFFERED = ["warranty_length", "shipping_times"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("clarify-home"), TANDEM_CLARIFY="on") as running:
        yield running


@pytest.fixture(scope="module")
def api(app):
    with httpx.Client(base_url=app.url, timeout=120) as client:
        yield client


def feedback_on(app, request_id: str) -> list[Feedback]:
    with app.db.session() as session:
        return list(session.exec(select(Feedback).where(Feedback.request_id == request_id)).all())


def test_http_api_gives_the_options_and_answers_the_choice_from_the_kb(app, api):
    asked = api.post("/api/v1/chat", json={"message": AMBIGUOUS}).json()
    assert asked["route"] == "clarify"
    assert [o["answer_id"] for o in asked["options"]][:2] == OFFERED and asked["options"][-1]["answer_id"] == "other"
    chosen = api.post("/api/v1/chat", json={"message": "How long is the warranty?", "session_id": asked["session_id"],
                                            "choice": "warranty_length"}).json()
    assert chosen["route"] == "small" and [s["answer_id"] for s in chosen["sources"]] == ["warranty_length"]
    assert [(f.answer_id, f.chosen_in) for f in feedback_on(app, asked["request_id"])] == [
        ("warranty_length", chosen["request_id"])]


def test_openai_endpoint_gives_the_options_and_answers_the_choice_sent_as_an_extra_field(app):
    import openai

    client = openai.OpenAI(base_url=app.url + "/v1", api_key="unused", max_retries=0)
    first = [{"role": "user", "content": AMBIGUOUS}]
    asked = client.chat.completions.create(model="tandem", messages=first).model_dump()
    assert asked["tandem"]["route"] == "clarify"
    assert [o["answer_id"] for o in asked["tandem"]["options"]][:2] == OFFERED
    question = asked["choices"][0]["message"]["content"]
    assert "How long does shipping take?" in question
    reply = [*first, {"role": "assistant", "content": question}, {"role": "user", "content": "shipping"}]
    chosen = client.chat.completions.create(model="tandem", messages=reply,
                                            extra_body={"choice": "shipping_times"}).model_dump()
    assert chosen["tandem"]["route"] == "small"
    assert [s["answer_id"] for s in chosen["tandem"]["sources"]] == ["shipping_times"]
    assert [f.answer_id for f in feedback_on(app, asked["tandem"]["request_id"])] == ["shipping_times"]


def test_gradio_chat_shows_the_options_as_buttons_and_a_button_answers_from_the_kb(app):
    from gradio_client import Client

    gradio = Client(app.url + "/", verbose=False, httpx_kwargs=GRADIO_CLIENT_HTTPX)
    history, _box, details = gradio.predict({"text": AMBIGUOUS, "files": []}, api_name="/chat")
    assert details["route"] == "clarify"
    buttons = history[-1]["options"]
    assert [b["value"] for b in buttons][:2] == OFFERED and buttons[0]["label"] == "How long is the warranty?"
    history, _box, details = gradio.predict("shipping_times", history, api_name="/choose")
    assert details["route"] == "small" and [s["answer_id"] for s in details["sources"]] == ["shipping_times"]
    assert history[-2]["role"] == "user" and "How long does shipping take?" in str(history[-2]["content"])
    with app.db.session() as session:
        row = session.get(RequestLog, details["request_id"])
    assert row is not None and row.channel == "ui" and row.route == "small"
