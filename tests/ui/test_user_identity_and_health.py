"""Who the chat customer is (the demo "signed in as" picker on loopback, the host page's signed X-Tandem-Customer
token) and what a real app with broken parts reports on /healthz while it keeps answering."""

from __future__ import annotations

import httpx
import pytest
from gradio_client import Client, handle_file

from tests.conftest import demo_order_items
from tests.ui.conftest import ASSETS, app_env, start_app, stop_app

pytestmark = pytest.mark.slow

ORDER_QUESTION = "where is my order NW-104233?"  # a demo order of alice's (storage/seed.py)
NOT_FOUND = "I can't find order NW-104233 on your account"


def shows_alice_items(reply: str) -> bool:
    """Whether the reply lists the items of alice's order NW-104233."""
    return all(item in reply for item in demo_order_items("NW-104233"))


def open_page(client: Client) -> dict:
    """What a browser does when the page opens: the page-load event (not an API endpoint) fills the picker for this
    client's session. Returns the picker update it sent back."""
    config = client.config
    picker = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "signed-in-as")
    fn_index = next(i for i, dep in enumerate(config["dependencies"]) if picker in dep["outputs"] and not dep["inputs"])
    reply = httpx.post(client.src_prefixed + "run/predict", timeout=30,
                       json={"fn_index": fn_index, "data": [], "session_hash": client.session_hash})
    assert reply.status_code == 200, reply.text
    return reply.json()["data"][0]


def chat(client: Client, text: str = "", picked: str = "", files=()) -> tuple[str, dict]:
    history, _box, details = client.predict({"text": text, "files": [handle_file(str(f)) for f in files]},
                                            picked=picked, api_name="/chat")
    return "".join(part.get("text", "") for part in history[-1]["content"]), details


def logged(home, model, key):
    from storage.db import open_database

    with open_database(f"sqlite:///{home / 'tandem.db'}").session() as session:
        return session.get(model, key)


# --- 5. the demo picker ----------------------------------------------------------------------------
def test_the_signed_in_as_picker_passes_the_picked_customer_to_the_order_tool(app_server, tandem_home):
    from storage.tables import RequestLog

    client = Client(app_server.url + "/", verbose=False)
    update = open_page(client)
    assert update["visible"] is True and ["alice", "alice"] in update["choices"] and ["bob", "bob"] in update["choices"]

    own, own_details = chat(client, ORDER_QUESTION, picked="alice")
    assert own_details["route"] == "tool" and shows_alice_items(own) and NOT_FOUND not in own
    other, other_details = chat(client, ORDER_QUESTION, picked="bob")
    assert other_details["route"] == "tool" and NOT_FOUND in other and not shows_alice_items(other)
    guest, _ = chat(client, ORDER_QUESTION, picked="")
    assert NOT_FOUND in guest
    assert logged(tandem_home, RequestLog, own_details["request_id"]).user_id == "alice"
    assert logged(tandem_home, RequestLog, other_details["request_id"]).user_id == "bob"


# --- 6. the host page's signed header --------------------------------------------------------------
SECRET = "host-page-secret"


@pytest.fixture(scope="module")
def signed_app(tmp_path_factory):
    home = tmp_path_factory.mktemp("signed-app")
    app = start_app(home / "serve.log", app_env(home, TANDEM_IDENTITY_SECRET=SECRET, TANDEM_UI_USER_PICKER="false"))
    yield app, home
    stop_app(app)


def test_a_signed_customer_token_is_accepted_and_a_forged_expired_or_unsigned_one_is_ignored(signed_app):
    import time

    from core.identity import issue_token
    from storage.tables import Handoff, RequestLog

    app, home = signed_app
    update = open_page(Client(app.url + "/", verbose=False))
    assert update["visible"] is False and update["choices"] == [["", ""]]  # picker off: hidden, nobody to pick
    signed = Client(app.url + "/", verbose=False, headers={"X-Tandem-Customer": issue_token("alice", SECRET)})
    reply, details = chat(signed, ORDER_QUESTION)
    assert details["route"] == "tool" and shows_alice_items(reply) and NOT_FOUND not in reply
    assert logged(home, RequestLog, details["request_id"]).user_id == "alice"
    notice, _comment = signed.predict("please call me", "", api_name="/handoff")
    assert logged(home, Handoff, int(notice.split("ticket #")[1].split(")")[0])).user_id == "alice"

    for header in (issue_token("alice", "not-the-secret"), "alice",
                   issue_token("alice", SECRET, ttl_s=60, now=time.time() - 3600)):
        forged = Client(app.url + "/", verbose=False, headers={"X-Tandem-Customer": header})
        reply, details = chat(forged, ORDER_QUESTION)
        assert details["route"] == "tool" and NOT_FOUND in reply and not shows_alice_items(reply), header
        assert logged(home, RequestLog, details["request_id"]).user_id == "", header
        notice, _comment = forged.predict("please call me", "", api_name="/handoff")
        assert logged(home, Handoff, int(notice.split("ticket #")[1].split(")")[0])).user_id == "", header


# --- 7. broken parts are reported on /healthz; the app still answers ------------------------------------
@pytest.fixture(scope="module")
def faulty_app(tmp_path_factory):
    """An app with an unknown TANDEM_ROUTER and a damaged Whisper folder (right size, zeroed weights)."""
    from core.model_files import model_path
    from core.settings import get_settings

    good = model_path("whisper-base", get_settings().models_dir)
    models = tmp_path_factory.mktemp("damaged-models")
    folder = models / "whisper-base"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        (folder / name).write_bytes((good / name).read_bytes())
    with (folder / "model.bin").open("wb") as damaged:
        damaged.truncate((good / "model.bin").stat().st_size)  # sparse: no disk space, same size as a good one
    home = tmp_path_factory.mktemp("faulty-app")
    app = start_app(home / "serve.log", app_env(home, TANDEM_ROUTER="no-such-router", TANDEM_MODEL_DIR=str(models)))
    yield app, home, folder
    stop_app(app)


def test_healthz_reports_an_unknown_router_and_a_text_message_is_still_answered(faulty_app):
    app, _home, _folder = faulty_app
    health = httpx.get(app.url + "/healthz", timeout=10).json()
    assert health["ready"] is True and health["status"] == "degraded"
    assert "unknown router 'no-such-router' (TANDEM_ROUTER); using 'evidence'" in health["problems"]
    assert health["router"] == "evidence"
    answer = httpx.post(app.url + "/api/v1/chat", json={"message": "How do I reset my password?"}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["route"] != "guard" and "password" in answer.json()["answer"].lower()


def test_healthz_reports_a_whisper_that_fails_to_load_and_a_voice_message_is_still_answered(faulty_app):
    from storage.tables import RequestLog

    app, home, folder = faulty_app
    problems = httpx.get(app.url + "/healthz", timeout=10).json()["problems"]
    assert any(p.startswith(f"Whisper failed to load from {folder}") for p in problems), problems
    assert not any("OCR" in p for p in problems), problems
    client = Client(app.url + "/", verbose=False)
    reply, details = chat(client, files=[ASSETS / "speech.wav"])
    assert details["route"] == "guard" and details["attachment_errors"] and details["attachment_errors"][0] in reply
    assert logged(home, RequestLog, details["request_id"]).error == details["attachment_errors"][0]
    text_reply, text_details = chat(client, "How do I reset my password?")
    assert text_details["route"] != "guard" and "password" in text_reply.lower()


def test_with_whisper_down_a_screenshot_sent_with_a_voice_message_is_still_read(faulty_app):
    """app/media.py promises "one bad file does not spoil the others"."""
    app, _home, _folder = faulty_app
    client = Client(app.url + "/", verbose=False)
    reply, details = chat(client, files=[ASSETS / "order_text.png", ASSETS / "speech.wav"])
    assert details["extracted"] == ["ORDER NW-104233 where is my parcel"], (details, reply)
    assert "speech.wav" in reply

