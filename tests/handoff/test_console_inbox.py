"""The console's inbox page (AppTest, the session database): the queue oldest first with its count (on the page and
in the sidebar), the handoff packet, claim, the composer pre-filled with the suggestion, send, hand-back with a
summary; help-center answers found by a search and put into the composer; a signed customer's id and orders, and a
guest said to be unverified."""

from __future__ import annotations

import pytest
from sqlmodel import col, delete, select

from chains.conversation import Conversations
from storage.tables import ChatMessage, ChatSession, ConversationEvent, ConversationState, OperatorSeen
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
        session.exec(delete(ChatSession).where(col(ChatSession.id).in_(SESSIONS)))
        session.exec(delete(OperatorSeen))
        session.commit()


def test_an_operator_claims_the_oldest_conversation_sends_the_edited_suggestion_and_hands_it_back(queued):
    at = sign_in(new_app().run())
    at = at.switch_page("views/inbox.py").run()
    assert not at.exception, at.exception
    waiting = len(queued.queue(("waiting",)))  # ours, and any other test's in the session database
    assert at.main.metric[0].value == str(waiting) and waiting >= 2
    assert at.sidebar.metric[0].label == "Waiting for a person" and at.sidebar.metric[0].value == str(waiting)
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
    assert at.main.metric[0].value == str(waiting - 1) and at.sidebar.metric[0].value == str(waiting - 1)


def claimed(queued, session_id: str):
    """A signed-in inbox with ``session_id`` chosen and claimed (the composer shown)."""
    at = sign_in(new_app().run()).switch_page("views/inbox.py").run()
    at = at.selectbox(key="inbox_selected").set_value(session_id).run()
    at = at.button(key=f"inbox_claim_{session_id}").click().run()
    assert not at.exception, at.exception
    return at


def test_a_help_center_search_offers_kb_answers_and_the_chosen_one_fills_the_composer(queued, settings, encoder):
    from chains.runtime import open_kb
    from console import ui
    from knowledge.demo_kb import seed_demo_kb

    kb = open_kb(settings, encoder)  # the console's store under TANDEM_HOME starts empty in tests: the demo goes in
    seed_demo_kb(kb)
    ui._knowledge_base.clear()
    refund = next(e["answer"] for e in kb.entries() if e["answer_id"] == "refund_timing")
    at = claimed(queued, SESSIONS[1])
    at = at.text_input(key=f"inbox_kb_search_{SESSIONS[1]}").set_value("how long until my money is back").run()
    assert not at.exception, at.exception
    offered = [b.key for b in at.button if b.key and b.key.startswith(f"inbox_use_{SESSIONS[1]}_")]
    assert f"inbox_use_{SESSIONS[1]}_refund_timing" in offered, offered
    assert any(t.value == refund for t in at.text)  # the answer itself, shown before it is chosen
    composer = at.text_area(key=f"inbox_composer_{SESSIONS[1]}")
    assert composer.value == "Refunds reach your account within 5-10 business days."  # still the suggestion
    at = at.button(key=f"inbox_use_{SESSIONS[1]}_refund_timing").click().run()
    assert not at.exception, at.exception
    assert at.text_area(key=f"inbox_composer_{SESSIONS[1]}").value == refund
    assert not [m for m in queued.messages(SESSIONS[1]) if m["role"] == "operator"]  # chosen, not sent


def test_a_signed_customers_id_and_orders_are_shown_and_a_guest_is_said_to_be_unverified(queued, db):
    from storage.tables import Order

    with db.session() as session:  # as the service opens sessions: the owner is the verified customer, or the caller
        session.add(ChatSession(id=SESSIONS[0], user_id="alice", owner="customer:alice"))
        session.add(ChatSession(id=SESSIONS[1], user_id="alice", owner="addr:127.0.0.1"))  # a label, no token
        session.commit()
        alices = sorted(o.order_id for o in session.exec(select(Order).where(Order.user_id == "alice")).all())
    assert alices
    at = sign_in(new_app().run()).switch_page("views/inbox.py").run()
    at = at.selectbox(key="inbox_selected").set_value(SESSIONS[0]).run()
    assert not at.exception, at.exception
    assert any("Signed in as **alice**" in m.value for m in at.markdown)
    orders = next(d.value for d in at.dataframe if "order_id" in d.value.columns)
    assert sorted(orders["order_id"]) == alices and "email" not in orders.columns
    assert not any("identity unverified" in i.value for i in at.info)

    at = at.selectbox(key="inbox_selected").set_value(SESSIONS[1]).run()
    assert not at.exception, at.exception
    assert [i.value for i in at.info if "identity unverified" in i.value] == [
        "Not signed in: identity unverified, orders not shown."]
    assert not any("order_id" in d.value.columns for d in at.dataframe)
    assert not any("Signed in as **" in m.value for m in at.markdown)
