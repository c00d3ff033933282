"""`POST /api/v1/chat` and friends against the running app: happy path, bad input (4xx JSON, never 500)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from core.settings import get_settings
from tests.ui.conftest import request_row

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(app_server):
    with httpx.Client(base_url=app_server.url, timeout=60) as client:
        yield client


def test_chat_happy_path_has_the_documented_shape(api):
    response = api.post("/api/v1/chat", json={"message": "How do I reset my password?", "user_id": "u-1"})
    assert response.status_code == 200, response.text
    body = response.json()
    # The customer's badge: no scores, reasons or trace (those are for admin keys and the console).
    assert set(body) == {"request_id", "route", "answer", "sources", "reason", "latency_ms", "degraded", "fallback",
                         "session_id", "served", "products", "filters", "intent"}
    # product cards, filters and the product intent: product messages only
    assert body["products"] == [] and body["filters"] == [] and body["intent"] == ""
    assert "password" in body["answer"].lower() and body["session_id"]
    # what the customer reads: the KB's draft, or the same answer from the cache when another test asked it first
    assert (body["route"], body["served"]) in {("small", "draft"), ("cache", "cache")}, body
    row = request_row(body["request_id"])
    assert row.channel == "api" and row.user_id == "u-1"

    again = api.post("/api/v1/chat", json={"message": "thanks, and returns?", "session_id": body["session_id"]})
    assert again.status_code == 200 and again.json()["session_id"] == body["session_id"]


@pytest.mark.parametrize("payload, status, says", [
    ({"message": ""}, 422, "Please type a question"),
    ({"message": "   \n\t "}, 422, "Please type a question"),
    ({"message": "x" * 50_000}, 413, "50,000 characters"),
])
def test_guarded_messages_are_4xx_and_logged(api, payload, status, says):
    response = api.post("/api/v1/chat", json=payload)
    assert response.status_code == status
    body = response.json()
    assert says in body["error"] and request_row(body["request_id"]).route == "guard"


@pytest.mark.parametrize("content, status, says", [
    (b"{not json", 400, "not valid JSON"),
    (b"", 400, "empty request body"),
    (b"[1, 2]", 422, "must be a JSON object"),
    (b'{"text": "hi"}', 422, "message: is required"),
    (b'{"message": 42}', 422, "message: must be a string"),
    (b'{"message": "hi", "session_id": ["a"]}', 422, "session_id: must be a string"),
    (b"\x80\x81 garbage", 400, "not UTF-8"),
    (b'{"message": "' + b"a" * 1_100_000 + b'"}', 413, "larger than"),
])
def test_malformed_bodies_are_4xx_json(api, content, status, says):
    response = api.post("/api/v1/chat", content=content, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert says in response.json()["error"]


def test_feedback_round_trip_and_bad_feedback(api):
    from sqlmodel import select

    from storage.db import open_database
    from storage.tables import Feedback

    request_id = api.post("/api/v1/chat", json={"message": "where is my refund"}).json()["request_id"]
    ok = api.post("/api/v1/feedback", json={"request_id": request_id, "rating": -1, "comment": "too vague"})
    assert ok.status_code == 200 and ok.json() == {"ok": True, "request_id": request_id}
    with open_database(get_settings().db_url).session() as session:
        rows = session.exec(select(Feedback).where(Feedback.request_id == request_id)).all()
    assert [(r.rating, r.comment) for r in rows] == [(-1, "too vague")]

    assert api.post("/api/v1/feedback", json={"request_id": request_id, "rating": 5}).status_code == 422
    missing = api.post("/api/v1/feedback", json={"request_id": "nope", "rating": 1})
    assert missing.status_code == 404 and "no answer" in missing.json()["error"]


def test_health_and_metrics(api):
    health = api.get("/healthz").json()
    assert health["status"] in ("ok", "degraded") and health["ready"] and health["kb_entries"] > 0
    assert "llm" in health
    metrics = api.get("/metrics")
    assert metrics.status_code == 200 and "tandem_requests_total" in metrics.text
    assert 'tandem_api_responses_total{endpoint="chat",status="200"}' in metrics.text


def test_wrong_method_and_unknown_path_are_json(api):
    wrong = api.get("/api/v1/chat")
    assert wrong.status_code == 405 and "use POST" in wrong.json()["error"] and wrong.headers["allow"] == "POST"
    unknown = api.post("/api/v1/chatt", json={"message": "hi"})
    assert unknown.status_code == 404 and "/api/v1/chatt" in unknown.json()["error"]


def test_an_idle_keep_alive_connection_outlives_httpx_and_nginx_pool_expiry_so_the_app_never_closes_it_first(
        app_server):
    """One connection, two requests 6 s apart (past uvicorn's default 5 s keep-alive, past httpx's pool expiry):
    the app must still hold the connection open, so an idle client's reuse never races the app's close."""
    url = httpx.URL(app_server.url)
    request = (f"GET /healthz HTTP/1.1\r\nHost: {url.host}:{url.port}\r\nConnection: keep-alive\r\n\r\n").encode()
    with socket.create_connection((url.host, url.port), timeout=10) as conn:
        for attempt in range(2):
            if attempt:
                time.sleep(6)
            conn.sendall(request)
            head = _read_response(conn)
            assert head.startswith(b"HTTP/1.1 200"), (attempt, head[:200])


def _read_response(conn: socket.socket) -> bytes:
    """One whole HTTP/1.1 response with a Content-Length body (b"" if the server closed the connection)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body
