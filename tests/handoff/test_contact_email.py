"""With nobody online, the waiting customer is asked for an email address and told when the reply will come; the next
message that is a valid address is stored for the operators (the inbox's contact_email), acknowledged partly hidden,
and logged masked; one that fails the check gets a clear line asking again, and is still logged and shown to
operators. With someone online, no address is asked for. Through the service, with the real KB, rules and database
(asking for a person in words needs no LLM)."""

from __future__ import annotations

import pytest
from sqlmodel import select

from chains.contact import address_in, partly_hidden
from chains.schema import ChatRequest
from storage.tables import ChatMessage, RequestLog
from tests.conftest import fresh_db, make_runtime


@pytest.fixture
def runtime(settings, demo_kb, tmp_path):
    runtime = make_runtime(settings.model_copy(update={"handoff_reply_within_days": 2}), fresh_db(tmp_path), demo_kb)
    try:
        yield runtime
    finally:
        runtime.close()


def ask(runtime, message: str, session_id: str):
    return runtime.service.answer(ChatRequest(message=message, session_id=session_id, channel="api"))


def test_with_nobody_online_a_valid_address_is_asked_for_taken_for_the_operator_and_logged_masked(runtime):
    queued = ask(runtime, "I want to talk to a human about my refund", "nobody-online")
    assert queued.route == "handoff" and queued.handoff is not None
    assert queued.handoff["operators_online"] == 0 and queued.handoff["asks_for_email"] is True
    assert queued.handoff["reply_within_days"] == 2
    assert "email address" in queued.handoff["line"] and "within 2 business days" in queued.handoff["line"]

    given = ask(runtime, "my email is Jane.Doe@Example.com", "nobody-online")
    assert given.route == "handoff" and given.served == "contact_email", given.reasons
    assert given.answer.startswith("Thanks, we will reply to j***@example.com within 2 business days")
    assert given.handoff["contact_email"] == "j***@example.com" and given.handoff["asks_for_email"] is False
    assert "we will reply to j***@example.com within 2 business days" in given.handoff["line"]

    conversations = runtime.service.conversations
    assert conversations.state("nobody-online").contact_email == "jane.doe@example.com"
    item = next(i for i in conversations.inbox() if i["session_id"] == "nobody-online")
    assert item["contact_email"] == "jane.doe@example.com"  # the operator reads it whole

    with runtime.db.session() as session:
        row = session.get(RequestLog, given.request_id)
        messages = session.exec(select(ChatMessage).where(ChatMessage.request_id == given.request_id)).all()
    assert row is not None and row.text == "my email is [email]"
    assert "jane" not in (row.answer + str(row.trace) + str(row.reasons)).lower()
    assert "[email]" in row.answer
    assert [m.content for m in messages if m.role == "user"] == ["my email is [email]"]
    history = conversations.history("nobody-online")
    assert [h["text"] for h in history if h["role"] == "customer"][-1] == "my email is [email]"


def test_an_invalid_address_gets_a_clear_line_and_is_asked_again_still_logged_for_operators(runtime):
    ask(runtime, "talk to a human please", "invalid-address")
    wrong = ask(runtime, "jane.doe@example", "invalid-address")
    assert wrong.route == "handoff" and wrong.served == "contact_invalid"
    assert "does not look like a complete email address" in wrong.answer and "send it again" in wrong.answer
    assert runtime.service.conversations.state("invalid-address").contact_email == ""
    assert wrong.handoff["asks_for_email"] is True
    history = runtime.service.conversations.history("invalid-address")
    assert [h["text"] for h in history if h["role"] == "customer"][-1] == "jane.doe@example"
    assert runtime.service.request_exists(wrong.request_id)


def test_a_chinese_customer_is_asked_and_answered_in_chinese(runtime):
    queued = ask(runtime, "转人工", "zh-waiting")
    assert queued.handoff is not None and "电子邮件地址" in queued.handoff["line"]
    assert "2个工作日内" in queued.handoff["line"]
    given = ask(runtime, "我的邮箱是li.wei@example.cn", "zh-waiting")
    assert given.served == "contact_email" and given.answer.startswith("谢谢，我们会在2个工作日内回复到 l***@example.cn")
    wrong = ask(runtime, "li.wei@@example.cn", "zh-waiting")
    assert wrong.served == "contact_invalid" and "请重新发送" in wrong.answer


def test_with_someone_online_no_address_is_asked_for_and_the_line_says_who_is_there_and_the_wait(runtime):
    conversations = runtime.service.conversations
    conversations.seen("dana")
    ask(runtime, "talk to a human please", "picked-up-first")
    conversations.claim("picked-up-first", "dana")  # a pick-up: the expected wait has a sample
    queued = ask(runtime, "I'd like to speak to an agent", "someone-online")
    assert queued.handoff is not None and queued.handoff["operators_online"] == 1
    assert queued.handoff["asks_for_email"] is False and queued.handoff["reply_within_days"] is None
    assert queued.handoff["expected_wait_s"] is not None
    line = queued.handoff["line"]
    assert "1 colleague(s) online" in line and "The expected wait is about 1 minute(s)" in line and "email" not in line


def test_a_message_that_is_no_address_goes_to_the_chain_while_waiting(runtime):
    ask(runtime, "talk to a human", "still-asking")
    answered = ask(runtime, "How do I reset my password?", "still-asking")
    assert answered.served not in ("contact_email", "contact_invalid")
    assert "password" in answered.answer.lower()


@pytest.mark.parametrize(("text", "address", "valid"), [
    ("jane@example.com", "jane@example.com", True),
    ("<Ann.O'Neil+shop@mail.example.org>.", "ann.o'neil+shop@mail.example.org", True),
    ("我的邮箱是a@b.cn", "a@b.cn", True), ("jane@example", "", False), ("jane..doe@example.com", "", False),
    ("a@b@c.com", "", False), ("jane@-example.com", "", False), ("How do I reset my password?", None, None)])
def test_the_address_check(text, address, valid):
    given = address_in(text)
    if address is None:
        assert given is None
    else:
        assert given is not None and (given.address, given.valid) == (address, valid)


def test_an_address_is_shown_back_partly_hidden():
    assert partly_hidden("jane.doe@example.com") == "j***@example.com"
