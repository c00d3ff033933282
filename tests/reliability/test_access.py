"""Access: per-user and per-session rate limits (429 with a clear message), the API token, upload limits.

Also covered elsewhere, not repeated here: the console login throttle
(tests/console/test_console_app.py::test_wrong_password_is_refused_then_throttled), the bearer token on and
off (tests/ui/test_api_token.py), and uploads over TANDEM_MAX_UPLOAD_MB (test_bad_input_corpus.py,
case image-over-limit, and tests/ui/test_chat_gradio.py::test_upload_over_the_limit).
"""

from __future__ import annotations

import pytest

from chains.schema import ChatRequest
from tests.api import api_client
from tests.conftest import make_runtime

pytestmark = pytest.mark.slow


@pytest.fixture
def limited(settings, db, small_kb):
    limited_settings = settings.model_copy(update={"rate_limit_per_min": 3})
    return limited_settings, make_runtime(limited_settings, db, small_kb)


def test_rate_limit_per_user_and_per_session(limited):
    _, runtime = limited

    def ask(user: str = "", session: str = ""):
        return runtime.service.answer(ChatRequest(message="How do I track my order?", user_id=user,
                                                  session_id=session, channel="api"))

    assert all(ask(user="mallory").route != "guard" for _ in range(3))
    refused = ask(user="mallory")
    assert refused.route == "guard" and "per minute" in refused.answer and "wait" in refused.answer
    assert ask(user="alice").route != "guard"          # other users are not affected
    assert all(ask(session="s-1").route != "guard" for _ in range(3))
    assert ask(session="s-1").route == "guard"          # anonymous, but one session


def test_rate_limited_api_call_is_429_json(limited):
    settings, runtime = limited
    with api_client(settings, runtime) as client:
        statuses = [client.post("/api/v1/chat", json={"message": "How do I track my order?", "user_id": "eve"})
                    for _ in range(4)]
    assert [r.status_code for r in statuses[:3]] == [200, 200, 200]
    assert statuses[3].status_code == 429 and "per minute" in statuses[3].json()["error"]


def test_api_token_guards_chat(settings, db, small_kb):
    guarded = settings.model_copy(update={"api_token": "t0ken"})
    with api_client(guarded, make_runtime(guarded, db, small_kb)) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = client.post("/api/v1/chat", json={"message": "hi"}, headers=headers)
            assert response.status_code == 401 and "Bearer" in response.json()["error"]
        ok = client.post("/api/v1/chat", json={"message": "hi"}, headers={"Authorization": "Bearer t0ken"})
        assert ok.status_code == 200
