"""The handoff webhook: a real local HTTP receiver gets each operator message and handoff change as signed JSON
(it checks the HMAC over the raw body), and a receiver that fails at first gets the event on a retry."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chains.conversation import Conversations
from chains.handoff_webhook import SIGNATURE_HEADER, Webhook
from tests.conftest import fresh_db

SECRET = "shop-webhook-secret"


class Receiver:
    """The shop's endpoint: keeps the events whose signature verifies; answers 503 to the first ``fail_first``."""

    def __init__(self, fail_first: int = 0):
        self.events: list[dict] = []
        self.refused = 0
        self.calls = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802  (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.calls += 1
                expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(self.headers.get(SIGNATURE_HEADER, ""), expected):
                    receiver.refused += 1
                    self.send_response(401)
                elif receiver.calls <= fail_first:
                    self.send_response(503)
                else:
                    receiver.events.append(json.loads(body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/tandem"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 3.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.events) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.events

    def close(self):
        self.server.shutdown()


@pytest.fixture
def receiver():
    made: list[Receiver] = []
    yield lambda **kw: made.append(Receiver(**kw)) or made[-1]
    for r in made:
        r.close()


def test_operator_messages_and_handoff_changes_reach_the_shop_signed(tmp_path, receiver):
    shop = receiver()
    conversations = Conversations(fresh_db(tmp_path), notify=Webhook(shop.url, SECRET, backoff_s=0.05))
    conversations.hand_off("w1", "button", "pressed the button")
    conversations.claim("w1", "dana")
    conversations.reply("w1", "dana", "Hi, Dana here: write to dana@example.com")
    events = shop.wait_for(3)
    assert shop.refused == 0
    assert sorted((e["event"], e.get("to", "")) for e in events) == [
        ("handoff", "human"), ("handoff", "waiting"), ("message", "")]
    message = next(e for e in events if e["event"] == "message")
    assert message["session_id"] == "w1" and message["message"]["author"] == "dana"
    assert message["message"]["text"] == "Hi, Dana here: write to dana@example.com"  # the customer's copy, as written


def test_a_failing_receiver_gets_the_event_on_a_retry_and_a_wrong_key_is_refused(tmp_path, receiver):
    flaky = receiver(fail_first=2)
    Webhook(flaky.url, SECRET, backoff_s=0.05)("message", {"session_id": "w2"})
    assert [e["session_id"] for e in flaky.wait_for(1)] == ["w2"] and flaky.calls == 3
    strict = receiver()
    forged = Webhook(strict.url, "not-the-shops-key", backoff_s=0.05)
    forged("message", {"session_id": "w3"})
    deadline = time.monotonic() + 3
    while strict.refused == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert strict.events == [] and strict.refused == 1  # a 401 is not retried
