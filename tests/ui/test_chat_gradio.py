"""The chat through `gradio_client`, as an API client or the browser would send it: text, photo, voice, bad files."""

from __future__ import annotations

import pytest
from gradio_client import handle_file
from PIL import Image

from core.settings import get_settings
from tests.ui.conftest import ASSETS, UPLOAD_LIMIT_MB, request_row

pytestmark = pytest.mark.slow


def send(gradio, text: str = "", files=()):
    history, _box, details = gradio.predict({"text": text, "files": [handle_file(str(f)) for f in files]},
                                            api_name="/chat")
    return reply_of(history), details


def reply_of(history: list) -> str:
    reply = history[-1]
    assert reply["role"] == "assistant"
    content = reply["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def test_text_message_streams_an_answer_with_a_route_badge(gradio):
    # A question no other test of the session's app asks: neither an exact nor a semantic cache hit can answer it.
    job = gradio.submit({"text": "Do you offer a student discount?", "files": []}, api_name="/chat")
    job.result()
    updates = job.outputs()
    replies = [reply_of(history) for history, _box, _details in updates]
    assert len(updates) > 1, replies  # the reply is shown while it is written, not only once done
    assert any("Northwind Student" in text and "route-badge" not in text for text in replies[:-1]), replies
    reply, details = replies[-1], updates[-1][2]
    assert "Northwind Student" in reply and 'class="route-badge"' in reply and "why this route" in reply
    assert details["route"] == "small" and details["sources"][0]["answer_id"] == "student_discount"
    row = request_row(details["request_id"])
    assert row is not None and row.channel == "ui" and row.modality == "text" and row.route == details["route"]


def test_screenshot_text_is_read_and_answered(gradio):
    reply, details = send(gradio, files=[ASSETS / "order_text.png"])
    assert details["extracted"] == ["ORDER NW-104233 where is my parcel"]
    assert "I read:" in reply and "NW-104233" in reply
    row = request_row(details["request_id"])
    assert row.modality == "image" and "where is my parcel" in row.text


def test_voice_message_is_transcribed_and_answered(gradio):
    reply, details = send(gradio, files=[ASSETS / "speech.wav"])
    heard = details["extracted"][0].lower()
    assert "reset" in heard and "password" in heard
    assert "I heard:" in reply and "password" in reply.lower()
    assert request_row(details["request_id"]).modality == "audio"


@pytest.mark.parametrize("name, says", [
    ("not_an_image.png", "is not an image I can read"),
    ("corrupt.png", "looks damaged"),
    ("empty.wav", "is empty (0 bytes)"),
    ("unknown_codec.wav", "is not audio I can play"),
])
def test_unreadable_file_gets_a_clear_answer_and_a_logged_row(gradio, name, says):
    reply, details = send(gradio, files=[ASSETS / name])
    assert says in reply and details["route"] == "guard"
    row = request_row(details["request_id"])
    assert row is not None and says in row.error


def test_upload_over_the_limit(gradio, tmp_path):
    big = tmp_path / "huge_photo.png"
    Image.effect_noise((1200, 1200), 80).convert("RGB").save(big)  # noise does not compress: ~4 MB
    assert big.stat().st_size > UPLOAD_LIMIT_MB * 1024 * 1024
    reply, details = send(gradio, files=[big])
    assert f"the limit is {UPLOAD_LIMIT_MB} MB" in reply
    assert request_row(details["request_id"]) is not None


@pytest.mark.parametrize("text, says", [("", "Please type a question"), ("x" * 50_000, "50,000 characters")])
def test_empty_and_huge_text(gradio, text, says):
    reply, details = send(gradio, text)
    assert says in reply and details["route"] == "guard"
    assert request_row(details["request_id"]) is not None


def test_good_text_with_a_bad_file_answers_the_text_and_warns(gradio):
    reply, details = send(gradio, "where is my refund", files=[ASSETS / "corrupt.png"])
    assert "corrupt.png looks damaged" in reply and details["route"] != "guard"
    assert details["modality"] == "text+image"


def test_session_continues_after_bad_input(gradio):
    send(gradio, "")
    first_session = gradio.predict({"text": "hello", "files": []}, api_name="/chat")[2]["session_id"]
    _reply, details = send(gradio, "and how do returns work?")
    assert details["session_id"] == first_session and details["route"] != "guard"


def test_talk_to_a_human_opens_a_handoff(gradio):
    from storage.db import open_database
    from storage.tables import Handoff

    notice, comment_box = gradio.predict("please call me back", api_name="/handoff")  # State is not returned
    assert "ticket #" in notice
    ticket = int(notice.split("ticket #")[1].split(")")[0])
    with open_database(get_settings().db_url).session() as session:
        row = session.get(Handoff, ticket)
    assert row is not None and row.session_id and row.status == "open"
    assert row.note == "please call me back" and comment_box == ""
