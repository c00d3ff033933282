"""Personal data: masked in the request log (and so in the console), never shared across users by the
cache, and orders shown to their owner only (alice owns NW-104233 in knowledge/demo/orders.csv)."""

from __future__ import annotations

import pytest

from chains.schema import ChatRequest
from tests.reliability.conftest import make_service

pytestmark = pytest.mark.slow

PERSONAL = "My email is carol.smith@example.com, phone +1 415 555 0134, order NW-105390. How do I reset my password?"
RAW_VALUES = ("carol.smith@example.com", "415 555 0134", "NW-105390")


def test_personal_data_is_masked_in_the_log(reliability_app, api):
    body = api.post("/api/v1/chat", json={"message": PERSONAL, "user_id": "carol"}).json()
    row = reliability_app.row(body["request_id"])
    stored = row["text"] + row["answer"] + row["trace"]
    assert "[email]" in row["text"] and "[phone]" in row["text"] and "[order]" in row["text"]
    assert not any(value in stored for value in RAW_VALUES), stored[:400]


def test_masking_can_be_turned_off(settings, db, small_kb):
    from storage.tables import RequestLog

    unmasked = settings.model_copy(update={"mask_pii": False})
    response = make_service(unmasked, db, small_kb).answer(ChatRequest(message=PERSONAL, user_id="carol",
                                                                       channel="api"))
    with db.session() as session:
        row = session.get(RequestLog, response.request_id)
    assert all(value in row.text for value in RAW_VALUES)


def test_conversation_memory_feedback_and_handoff_notes_are_stored_masked(settings, db, small_kb):
    """Bug: the messages table stored chat text unmasked, and the console showed comments and notes unmasked."""
    from sqlmodel import select

    from storage.tables import ChatMessage, Feedback, Handoff

    service = make_service(settings, db, small_kb)
    response = service.answer(ChatRequest(message=PERSONAL, user_id="carol", session_id="pii-1", channel="api"))
    service.feedback(response.request_id, -1, "call me on +1 415 555 0134")
    ticket = service.handoff("pii-1", "carol", response.request_id, "write to carol.smith@example.com")
    with db.session() as session:
        memory = " ".join(m.content for m in session.exec(select(ChatMessage).where(ChatMessage.session_id == "pii-1")))
        comment = session.exec(select(Feedback).where(Feedback.request_id == response.request_id)).one().comment
        note = session.get(Handoff, ticket).note
    stored = memory + comment + note
    assert not any(value in stored for value in RAW_VALUES), stored
    assert "[email]" in memory and "[phone]" in comment and "[email]" in note


def test_cache_never_serves_one_users_personal_answer_to_another(api):
    def ask(message: str, user: str) -> dict:
        response = api.post("/api/v1/chat", json={"message": message, "user_id": user})
        assert response.status_code == 200
        return response.json()

    # Control: an impersonal question is cached and served to the next user (so the cache is on).
    general = "What payment methods do you accept for online orders?"
    ask(general, "alice")
    assert ask(general, "bob")["route"] == "cache"
    # A message with personal data is neither stored nor served, even word for word.
    personal = "I am alice@example.com, what payment methods do you accept for online orders?"
    first = ask(personal, "alice")
    second = ask(personal, "bob")
    assert first["route"] != "cache" and second["route"] != "cache"


def test_order_tool_shows_an_order_to_its_owner_only(api, reliability_app):
    from core.identity import identity_key, issue_token

    key = identity_key("", reliability_app.home)  # the key the app made in its home (no TANDEM_IDENTITY_SECRET)

    def ask(user: str) -> dict:
        signed = {"X-Tandem-Customer": issue_token(user, key)} if user else {}
        return api.post("/api/v1/chat", json={"message": "Where is my order NW-104233?"}, headers=signed).json()

    bob, alice, anonymous, bob_again = ask("bob"), ask("alice"), ask(""), ask("bob")
    assert alice["route"] == "tool" and "shipped" in alice["answer"] and "JD014600003828473621" in alice["answer"]
    for other in (bob, anonymous, bob_again):
        assert other["route"] == "tool" and "can't find order NW-104233" in other["answer"]
        assert "shipped" not in other["answer"] and "JD0146" not in other["answer"]


def test_order_tool_answer_is_shown_in_full_and_stored_masked_in_row_memory_and_trace(settings, db, small_kb):
    """The customer reads their order; the request row, the conversation memory and the trace keep the number,
    items and tracking number as placeholders (status and carrier stay readable)."""
    import json

    from sqlmodel import select

    from storage.tables import ChatMessage, RequestLog
    from tests.conftest import demo_order_items

    service = make_service(settings, db, small_kb)
    response = service.answer(ChatRequest(message="Where is my order NW-104233?", user_id="alice", customer="alice",
                                          session_id="pii-tool", channel="api"))
    private = ["NW-104233", "JD014600003828473621", *demo_order_items("NW-104233")]
    assert response.route == "tool" and all(value in response.answer for value in private), response.answer
    with db.session() as session:
        row = session.get(RequestLog, response.request_id)
        memory = [m.content for m in session.exec(select(ChatMessage).where(ChatMessage.session_id == "pii-tool"))]
    stored = {"answer": row.answer, "text": row.text, "trace": json.dumps(row.trace, ensure_ascii=False),
              "memory": " ".join(memory)}
    for where, text in stored.items():
        assert not any(value in text for value in private), (where, text)
    assert row.answer == "Order [order] ([items]) is **shipped**. It travels with DHL, tracking number [tracking]. " \
                         "Expected delivery: 2026-11-20."
    assert memory[-1] == row.answer


def test_findings_error_reasons_and_nested_trace_values_are_stored_masked(settings, db, small_kb):
    import json

    from sqlmodel import select

    from chains.schema import ChatResponse
    from chains.turn import Turn
    from core.policy import Thresholds
    from core.settings import get_settings
    from storage.tables import Handoff, RequestLog

    service = make_service(settings, db, small_kb)
    request = ChatRequest(message="hi", user_id="carol", session_id="pii-nested", channel="api",
                          attachment_errors=["voice.ogg from carol.smith@example.com could not be read"])
    turn = Turn(request=request, thresholds=Thresholds.defaults(get_settings()), text="hi")
    turn.note("check", "removed", phones=["+1 415 555 0134", {"seen": ["NW-105390"]}], pair=("a", "NW-105390"))
    turn.findings = [{"kind": "phone", "value": "+1 415 555 0134", "action": "removed"}]
    turn.error = "ValueError: bad order NW-105390"
    turn.handoff = True
    turn.finish("small", "ok", "answer check: carol.smith@example.com is not in the sources")
    response = ChatResponse(request_id=turn.request_id, route="small", answer="ok", session_id="pii-nested")
    service._log(turn, response)
    with db.session() as session:
        row = session.get(RequestLog, turn.request_id)
        note = session.exec(select(Handoff).where(Handoff.request_id == turn.request_id)).one().note
    stored = {"findings": json.dumps(row.findings), "error": row.error, "reasons": json.dumps(row.reasons),
              "trace": json.dumps(row.trace), "handoff note": note}
    for where, text in stored.items():
        assert not any(value in text for value in RAW_VALUES + ("NW-105390",)), (where, text)
    assert row.findings == [{"kind": "phone", "value": "[phone]", "action": "removed"}]
    assert row.trace[0]["detail"] == {"phones": ["[phone]", {"seen": ["[order]"]}], "pair": ["a", "[order]"]}
    assert "[email]" in row.error and "[order]" in row.error and "[phone]" in note

