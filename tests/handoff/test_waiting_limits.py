"""Issue 57, trust: messages a customer sends while waiting for a person, or while a person holds the conversation,
count against the rate limits like any other, and each one (the refused one too) is logged for the console."""

from __future__ import annotations

from sqlmodel import select

from storage.tables import RequestLog
from tests.api import api_client
from tests.conftest import fresh_db, make_runtime
from tests.ratelimit import start_clear_of_a_window_boundary


def test_messages_while_waiting_count_against_the_rate_limit_and_are_all_logged(settings, demo_kb, tmp_path):
    limited = settings.model_copy(update={"rate_limit_per_min": 3})
    db = fresh_db(tmp_path)
    start_clear_of_a_window_boundary(needed_s=15)
    with api_client(limited, make_runtime(limited, db, demo_kb)) as client:
        asked = client.post("/api/v1/chat", json={"message": "Talk to a human please"})
        assert asked.status_code == 200 and asked.json()["route"] == "handoff", asked.text
        session_id = asked.json()["session_id"]
        for text in ("hello? anyone there?", "still waiting"):
            waiting = client.post("/api/v1/chat", json={"message": text, "session_id": session_id})
            assert waiting.status_code == 200, waiting.text
            assert waiting.json()["handoff"]["status"] == "waiting"
        refused = client.post("/api/v1/chat", json={"message": "hello??", "session_id": session_id})
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["retry-after"]) >= 1
    with db.session() as s:
        logged = list(s.exec(select(RequestLog).where(RequestLog.session_id == session_id)
                             .order_by(RequestLog.created_at)))
    assert [row.text for row in logged] == ["Talk to a human please", "hello? anyone there?", "still waiting", "hello??"]
    assert logged[0].route == "handoff" and logged[-1].route == "guard", [row.route for row in logged]
    assert any("rate limited" in reason for reason in logged[-1].reasons), logged[-1].reasons
