"""The console's inbox page (AppTest, the session database): the queue oldest first with its count, the handoff
packet, claim, the composer pre-filled with the suggestion, send, and hand-back with a summary."""

from __future__ import annotations

import pytest
from sqlmodel import col, delete

from chains.conversation import Conversations
from storage.tables import ChatMessage, ConversationEvent, ConversationState, OperatorSeen
from tests.console.conftest import clean_logins, new_app, sign_in  # noqa: F401  (clean_logins: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_logins")]
SESSIONS = ("inbox-older", "inbox-newer")


@pytest.fixture()
def queued(db):
    conversations = Conversations(db)
    with db.session() as session:  # operators other tests left online in the session database
        session.exec(delete(OperatorSeen))
        session.commit()
    packet = {"unsent": True, "reason": "rule asks-for-a-person", "passages": [
        {"answer_id": "refund_timing", "title": "When will I get my refund?", "score": 0.81, "text": "5-10 days"}],
        "draft": "Refunds reach your account within 5-10 business days.", "rejected": {"text": "", "findings": []},
        "suggestion": "Refunds reach your account within 5-10 business days."}
    for session_id in SESSIONS:
        with db.session() as session:
            session.add(ChatMessage(session_id=session_id, role="user", content="I want to talk to a human"))
            session.commit()
        conversations.hand_off(session_id, "asked", "rule asks-for-a-person: the customer asked for a person",
                               actor="customer", packet=packet)
    yield conversations
    with db.session() as session:
        for table in (ConversationState, ConversationEvent, ChatMessage):
            session.exec(delete(table).where(col(table.session_id).in_(SESSIONS)))  # type: ignore[attr-defined]
        session.exec(delete(OperatorSeen))
        session.commit()


def test_an_operator_claims_the_oldest_conversation_sends_the_edited_suggestion_and_hands_it_back(queued):
    at = sign_in(new_app().run())
    at = at.switch_page("views/inbox.py").run()
    assert not at.exception, at.exception
    waiting = len(queued.queue(("waiting",)))  # ours, and any other test's in the session database
    assert at.metric[0].value == str(waiting) and waiting >= 2
    table = at.dataframe[0].value
    assert [s for s in table["session"] if s in SESSIONS] == list(SESSIONS)  # the longest wait first
    at = at.selectbox(key="inbox_selected").set_value(SESSIONS[0]).run()
    assert queued.operators_online() == 1  # the open inbox counts its operator as online

    at = at.button(key=f"inbox_claim_{SESSIONS[0]}").click().run()
    assert not at.exception, at.exception
    assert queued.state(SESSIONS[0]).operator == "operator"
    composer = at.text_area(key=f"inbox_composer_{SESSIONS[0]}")
    assert composer.value == "Refunds reach your account within 5-10 business days."  # the suggestion, unsent
    at = composer.set_value("Hi, it's our team: your refund reaches you within 5-10 business days.").run()
    at = at.button(key=f"inbox_send_{SESSIONS[0]}").click().run()
    assert not at.exception, at.exception
    sent = [m for m in queued.messages(SESSIONS[0]) if m["role"] == "operator"]
    assert [(m["text"], m["author"]) for m in sent] == [
        ("Hi, it's our team: your refund reaches you within 5-10 business days.", "operator")]

    at = at.text_input(key=f"inbox_summary_{SESSIONS[0]}").set_value("refund timing explained").run()
    at = at.button(key=f"inbox_release_{SESSIONS[0]}").click().run()
    assert not at.exception, at.exception
    assert queued.state(SESSIONS[0]).status == "returned" and queued.state(SESSIONS[0]).summary == "refund timing explained"
    assert at.metric[0].value == str(waiting - 1)
