"""The clarify tier on real parts (MiniLM, the demo KB in Chroma, SQLite, no LLM): a message whose top answers are
close gets a question with them as options, and the customer's choice is answered from the KB and stored as
feedback on the question."""

from __future__ import annotations

import pytest
from sqlmodel import select

from chains.schema import ChatRequest
from storage.tables import Feedback, RequestLog
from tests.conftest import make_runtime

pytestmark = pytest.mark.slow

# "How long?" is warranty or shipping: the demo KB's two answers score 0.554 and 0.501 (MiniLM), inside the margin.
AMBIGUOUS = "how long"


@pytest.fixture(scope="module")
def service(settings, db, demo_kb):
    return make_runtime(settings.model_copy(update={"clarify": True}), db, demo_kb).service


def ask(service, text, session="", **choice):
    return service.answer(ChatRequest(message=text, session_id=session, user_id="carol", channel="api", **choice))


def feedback_on(service, request_id) -> list[Feedback]:
    with service.db.session() as session:
        return list(session.exec(select(Feedback).where(Feedback.request_id == request_id)).all())


def test_an_ambiguous_message_is_asked_back_with_the_close_answers_as_options(service):
    response = ask(service, AMBIGUOUS)
    assert response.route == "clarify"
    ids = [o.answer_id for o in response.options]
    assert ids[:2] == ["warranty_length", "shipping_times"] and ids[-1] == "other" and 3 <= len(ids) <= 4
    assert "How long is the warranty?" in response.answer and "How long does shipping take?" in response.answer
    assert any(reason.startswith("clarify: ") for reason in response.reasons)
    with service.db.session() as session:
        assert session.get(RequestLog, response.request_id).route == "clarify"


def test_choosing_an_option_answers_that_kb_answer_on_the_small_tier_and_stores_feedback(service):
    asked = ask(service, AMBIGUOUS)
    chosen = ask(service, "How long does shipping take?", session=asked.session_id, choice="shipping_times")
    assert chosen.route == "small" and [s.answer_id for s in chosen.sources] == ["shipping_times"]
    assert "[1] How long does shipping take?" in chosen.answer
    [stored] = feedback_on(service, asked.request_id)
    assert (stored.answer_id, stored.rating, stored.chosen_in) == ("shipping_times", 1, chosen.request_id)


def test_something_else_is_not_asked_again_and_is_stored_as_a_thumbs_down_on_the_question(service):
    asked = ask(service, AMBIGUOUS)
    other = ask(service, AMBIGUOUS, session=asked.session_id, choice="other")
    assert other.route != "clarify" and any("something else" in reason for reason in other.reasons)
    [stored] = feedback_on(service, asked.request_id)
    assert (stored.answer_id, stored.rating) == ("other", -1)


def test_an_offered_title_typed_after_the_question_chooses_it(service):
    asked = ask(service, AMBIGUOUS)
    history = [{"role": "user", "content": AMBIGUOUS}, {"role": "assistant", "content": asked.answer}]
    typed = service.answer(ChatRequest(message="How long is the warranty?", session_id=asked.session_id,
                                       channel="api", history=history))
    assert typed.route == "small" and [s.answer_id for s in typed.sources] == ["warranty_length"]
    assert [f.answer_id for f in feedback_on(service, asked.request_id)] == ["warranty_length"]


def test_with_clarify_off_the_same_message_is_answered_on_the_small_tier(settings, db, demo_kb):
    assert settings.clarify is False  # the shipped default
    response = ask(make_runtime(settings, db, demo_kb).service, AMBIGUOUS)
    assert response.route == "small" and not response.options


def test_the_same_rule_asks_in_the_chinese_space_in_chinese(settings, db, bilingual_kb):
    service = make_runtime(settings.model_copy(update={"clarify": True}), db, bilingual_kb).service
    asked = ask(service, "退货")  # start a return, or the return policy: 0.789 and 0.787 in the e5 space
    assert asked.route == "clarify" and asked.answer.startswith("您想问的是下面哪一项？")
    assert [o.answer_id for o in asked.options] == ["zh_start_return", "zh_return_policy", "other"]
    chosen = ask(service, "退货政策是怎样的？", session=asked.session_id, choice="zh_return_policy")
    assert chosen.route == "small" and [s.answer_id for s in chosen.sources] == ["zh_return_policy"]
