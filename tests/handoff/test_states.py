"""The conversation state machine (chains/conversation.py) on a real database: legal changes are stored with who, when
and why; illegal ones are refused and change nothing; two operators never hold the same conversation."""

from __future__ import annotations

import threading

import pytest

from chains.conversation import (
    BOT,
    HUMAN,
    RETURNED,
    TRANSITIONS,
    WAITING,
    Conversations,
    IllegalTransition,
    Taken,
    Triggers,
    action_of,
)
from core.pii import mask
from tests.conftest import fresh_db


@pytest.fixture
def conversations(tmp_path):
    return Conversations(fresh_db(tmp_path), scrub=mask)


def test_the_life_of_a_handoff_is_stored_change_by_change_with_who_and_why(conversations):
    state, changed = conversations.hand_off("s1", "asked", "the customer asked: call me at bob@example.com",
                                            actor="customer", request_id="r1", user_id="bob")
    assert changed and state.status == WAITING and state.waiting_since is not None
    assert "bob@example.com" not in state.reason  # masked like the request log
    assert conversations.claim("s1", "dana").status == HUMAN
    assert conversations.transfer("s1", "dana", "eli").operator == "eli"
    released = conversations.release("s1", "eli", "refund sent; nothing else open")
    assert released.status == RETURNED and released.operator == ""
    assert conversations.hand_off("s1", "rule", "again")[0].status == WAITING  # back with the bot: may be handed over again
    events = conversations.events("s1")
    assert [(e.from_status, e.to_status, e.actor) for e in events] == [
        (BOT, WAITING, "customer"), (WAITING, HUMAN, "operator:dana"), (HUMAN, HUMAN, "operator:dana"),
        (HUMAN, RETURNED, "operator:eli"), (RETURNED, WAITING, "bot")]
    assert events[0].trigger == "asked" and events[3].reason == "refund sent; nothing else open"
    assert all(e.created_at is not None for e in events) and "waited_s" in events[1].detail
    assert conversations.expected_wait_s() == round(events[1].detail["waited_s"], 1)


@pytest.mark.parametrize("start, move", [
    (BOT, "claim"), (BOT, "release"), (BOT, "reply"), (BOT, "cancel"), (WAITING, "release"), (WAITING, "reply"),
    (HUMAN, "cancel"), (RETURNED, "claim"), (RETURNED, "release")])
def test_illegal_transitions_are_refused_and_change_nothing(conversations, start, move):
    if start != BOT:
        conversations.hand_off("s", "asked", "asked")
    if start in (HUMAN, RETURNED):
        conversations.claim("s", "dana")
    if start == RETURNED:
        conversations.release("s", "dana", "")
    before = conversations.state("s")
    assert before.status == start
    actions = {"claim": lambda: conversations.claim("s", "eli"), "release": lambda: conversations.release("s", "dana"),
               "reply": lambda: conversations.reply("s", "dana", "hello"), "cancel": lambda: conversations.cancel("s")}
    with pytest.raises(IllegalTransition):
        actions[move]()
    after = conversations.state("s")
    assert (after.status, after.operator, after.version) == (before.status, before.operator, before.version)


def test_only_the_listed_changes_are_legal():
    statuses = (BOT, WAITING, HUMAN, RETURNED)
    for a in statuses:
        for b in statuses:
            if (a, b) in TRANSITIONS:
                assert action_of(a, b) == TRANSITIONS[(a, b)]
            else:
                with pytest.raises(IllegalTransition):
                    action_of(a, b)
    assert (BOT, HUMAN) not in TRANSITIONS and (HUMAN, BOT) not in TRANSITIONS  # a person only via the queue


def test_of_many_operators_claiming_at_once_exactly_one_holds_the_conversation(conversations):
    conversations.hand_off("race", "asked", "asked")
    results: dict[str, str] = {}
    barrier = threading.Barrier(6)

    def claim(name: str) -> None:
        barrier.wait()
        try:
            conversations.claim("race", name)
            results[name] = "won"
        except Taken:
            results[name] = "taken"

    threads = [threading.Thread(target=claim, args=(f"op{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [name for name, result in results.items() if result == "won"]
    assert len(winners) == 1 and len(results) == 6
    assert conversations.state("race").operator == winners[0]
    with pytest.raises(Taken):
        conversations.reply("race", next(n for n in results if n not in winners), "me too")


def test_a_switched_off_trigger_queues_nothing(tmp_path):
    conversations = Conversations(fresh_db(tmp_path), triggers=Triggers(answer_check=False))
    state, changed = conversations.hand_off("s", "answer_check", "failed checks")
    assert not changed and state.status == BOT
    assert conversations.state("s").status == BOT and conversations.events("s") == []


def test_the_waiting_customer_reads_their_place_the_operators_online_and_no_made_up_wait(conversations):
    conversations.hand_off("first", "asked", "asked")
    conversations.hand_off("second", "button", "button")
    view = conversations.view(conversations.state("second"))
    assert view is not None and (view["status"], view["position"], view["operators_online"]) == (WAITING, 2, 0)
    assert view["expected_wait_s"] is None  # no claim yet: no wait to quote
    conversations.seen("dana")
    conversations.claim("first", "dana")
    view = conversations.view(conversations.state("second"))
    assert view is not None and (view["position"], view["operators_online"]) == (1, 1)
    assert view["expected_wait_s"] is not None and view["expected_wait_s"] >= 0
    assert conversations.view(conversations.state("first")) == {
        "status": HUMAN, "trigger": "asked", "since": view_since(conversations, "first"), "operator": "dana",
        "position": None}


def view_since(conversations, session_id):
    state = conversations.state(session_id)
    return state.waiting_since.replace(tzinfo=state.waiting_since.tzinfo or __import__("datetime").UTC).isoformat()


def test_an_operators_reply_is_kept_masked_and_reaches_the_customer_as_written(conversations):
    conversations.hand_off("pii", "button", "pressed the button")
    conversations.claim("pii", "dana")
    conversations.reply("pii", "dana", "Write to dana.smith@example.com with order NW-104233.")
    stored = conversations.history("pii")[-1]  # what the console and any log read
    assert "dana.smith@example.com" not in stored["text"] and "NW-104233" not in stored["text"]
    delivered = conversations.messages("pii")[-1]  # the customer's own chat
    assert delivered == {**delivered, "role": "operator", "author": "dana",
                         "text": "Write to dana.smith@example.com with order NW-104233."}
    conversations.release("pii", "dana", "sent the address")
    assert [m["role"] for m in conversations.messages("pii")] == ["operator"]  # the hand-back note is the bot's only


def test_a_waiting_customer_can_cancel_and_is_with_the_bot_again(conversations):
    conversations.hand_off("c", "button", "pressed the button")
    assert conversations.cancel("c").status == BOT
    assert conversations.view(conversations.state("c")) is None  # nothing to show: the bot has it
    assert conversations.events("c")[-1].actor == "customer" and conversations.queue() == []


def test_the_packet_masks_the_customers_words_but_keeps_the_shops_own_draft_sendable():
    from chains.conversation import packet_from

    packet = packet_from(question="mail me at jo@example.org please", passages=[],
                         draft="You can also email support@northwind.example; we reply within 1 business day.",
                         rejected="Sure jo@example.org, done.", findings=[], reason="asked", request_id="r1", scrub=mask)
    assert "jo@example.org" not in packet["question"] and "jo@example.org" not in packet["rejected"]["text"]
    assert packet["suggestion"] == packet["draft"] == (
        "You can also email support@northwind.example; we reply within 1 business day.")
