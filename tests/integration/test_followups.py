"""Predicted follow-ups on real parts (MiniLM, the demo KB in Chroma, SQLite, no LLM): the service learns from its own
request log what customers ask next, offers it as suggested replies, answers a click from the KB at once, and the
console counts the clicks."""

from __future__ import annotations

import pytest

from app.protocol import ChatOut
from app.ui import SUGGESTED, option_buttons
from chains.followups import MIN_TRANSITIONS
from chains.schema import ChatRequest
from console import stats
from ops.logframes import load_requests
from tests.conftest import fresh_db, make_runtime

pytestmark = pytest.mark.slow

# A journey the demo KB answers on the small tier, one message per answer (the answers' own titles).
JOURNEY = [("How do I track my order?", "track_order"), ("Can I change my order?", "change_order"),
           ("How do I cancel my order?", "cancel_order")]


@pytest.fixture(scope="module")
def service(settings, demo_kb, tmp_path_factory):
    return make_runtime(settings, fresh_db(tmp_path_factory.mktemp("followups")), demo_kb).service


def ask(service, text, session="", **extra):
    return service.answer(ChatRequest(message=text, session_id=session, user_id="dora", channel="api", **extra))


def test_nothing_is_suggested_until_the_log_has_enough_follow_ups(service):
    first = ask(service, JOURNEY[0][0])
    assert first.route == "small" and first.sources[0].answer_id == "track_order"
    assert first.suggestions == [] and "suggestions" not in first.badge()


def test_after_sessions_in_the_log_the_learned_next_answer_is_suggested(service):
    sessions_needed = MIN_TRANSITIONS // (len(JOURNEY) - 1) + 1
    for _ in range(sessions_needed):
        session = ""
        for text, answer_id in JOURNEY:
            response = ask(service, text, session)
            assert response.sources[0].answer_id == answer_id
            session = response.session_id
    service.followups.refit()
    after_tracking = ask(service, JOURNEY[0][0])
    assert [s.answer_id for s in after_tracking.suggestions][:1] == ["change_order"]
    assert "track_order" not in [s.answer_id for s in after_tracking.suggestions]
    assert after_tracking.suggestions[0].title == "Can I change my order?"
    assert next(s for s in after_tracking.trace if s["stage"] == "suggest")["decision"] == "offered"
    # customers see them (the HTTP API's answer and the chat UI's buttons)
    assert ChatOut.of(after_tracking).suggestions[0].answer_id == "change_order"
    assert option_buttons(after_tracking)[0] == {"label": "Can I change my order?", "value": SUGGESTED + "change_order"}


def test_a_clicked_suggestion_is_answered_from_its_kb_answer_and_counted_as_a_click(service):
    before = stats.suggestion_clicks(load_requests(service.db))
    offered = ask(service, JOURNEY[0][0])
    suggestion = offered.suggestions[0]
    clicked = ask(service, suggestion.title, offered.session_id, suggestion=suggestion.answer_id)
    assert clicked.route == "small" and [s.answer_id for s in clicked.sources] == [suggestion.answer_id]
    assert next(s for s in clicked.trace if s["stage"] == "suggest")["decision"] == "clicked"
    assert next(s for s in clicked.trace if s["stage"] == "cache")["decision"] == "skipped"
    after = stats.suggestion_clicks(load_requests(service.db))
    assert after["clicked"] == before["clicked"] + 1 and after["hits"] >= before["hits"] + 1


def test_no_suggestions_under_a_refusal(service):
    refused = ask(service, "")
    assert refused.route == "guard" and refused.suggestions == []
