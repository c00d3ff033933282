"""The small tier asks "which one?" (chains/tiers/small.py) on real parts (MiniLM, the demo KB in Chroma, SQLite, no
LLM): a message two help-center answers fit about equally well gets their titles, numbered and as suggested replies,
instead of the top one served with confidence; a click or a typed number answers the choice; the question is asked
once in a row and never cached; a clear message gets its draft, and TANDEM_CLARIFY_MARGIN=0 switches it off."""

from __future__ import annotations

import pytest

from app.protocol import ChatOut
from app.ui import SUGGESTED, option_buttons
from chains.answers import WHICH_ONE_NOTICE
from chains.schema import ChatRequest, customer_reason
from tests.conftest import fresh_db, make_runtime

# On the demo KB its two best answers are 0.04 apart: how long shipping takes, and how to cancel an order.
AMBIGUOUS = "undo purchase before dispatch"


@pytest.fixture(scope="module")
def service(settings, demo_kb, tmp_path_factory):
    assert settings.clarify_margin > 0 and settings.response_cache
    return make_runtime(settings, fresh_db(tmp_path_factory.mktemp("which-one")), demo_kb).service


def ask(service, text, session="", **extra):
    return service.answer(ChatRequest(message=text, session_id=session, user_id="wanda", channel="api", **extra))


def test_close_answers_get_the_question_with_numbered_choices_and_no_citation(service):
    asked = ask(service, AMBIGUOUS)
    choices = [s.answer_id for s in asked.suggestions]
    assert asked.route == "small" and asked.served == "clarify", (asked.served, asked.reasons)
    assert "cancel_order" in choices and 2 <= len(choices) <= 3 and asked.sources == []
    assert asked.answer.startswith(WHICH_ONE_NOTICE)
    for number, suggestion in enumerate(asked.suggestions, 1):
        assert f"\n{number}. {suggestion.title}" in asked.answer
    assert asked.scores["kb_margin"] < service.chain.tiers["small"].parts.clarify_margins["en"]
    # every front end shows the choices: the HTTP API's answer and the chat UI's buttons
    assert [s.answer_id for s in ChatOut.of(asked).suggestions] == choices
    assert [b["value"] for b in option_buttons(asked)] == [SUGGESTED + c for c in choices]
    assert "pick the one you mean" in customer_reason(asked)


@pytest.mark.parametrize("reply", ["{n}", "the {nth} one, please", "第{n}个"])
def test_a_typed_number_answers_that_choice_from_the_help_center(service, reply):
    asked = ask(service, AMBIGUOUS)
    number = [s.answer_id for s in asked.suggestions].index("cancel_order") + 1
    nth = {1: "first", 2: "second", 3: "third"}[number]
    picked = ask(service, reply.format(n=number if "第" not in reply else "一二三"[number - 1], nth=nth),
                 asked.session_id)
    assert picked.route == "small" and picked.served == "draft", (picked.served, picked.reasons)
    assert [s.answer_id for s in picked.sources] == ["cancel_order"]
    assert any(step["stage"] == "suggest" and step["decision"] == "number typed" for step in picked.trace)


def test_a_click_answers_that_choice(service):
    asked = ask(service, AMBIGUOUS)
    clicked = ask(service, "How do I cancel my order?", asked.session_id, suggestion="cancel_order")
    assert clicked.served == "draft" and [s.answer_id for s in clicked.sources] == ["cancel_order"]


def test_the_question_is_asked_once_in_a_row_then_the_best_draft_is_served(service):
    asked = ask(service, AMBIGUOUS)
    again = ask(service, AMBIGUOUS, asked.session_id)
    assert asked.served == "clarify" and again.served == "draft" and again.sources, again.reasons


def test_the_question_is_not_cached_for_the_next_customer(service):
    first, second = ask(service, AMBIGUOUS), ask(service, AMBIGUOUS)
    assert first.session_id != second.session_id
    assert second.route == "small" and second.served == "clarify" and second.suggestions, second.reasons


def test_a_number_without_a_question_before_it_is_not_a_choice(service):
    plain = ask(service, "2")
    assert not any(step["stage"] == "suggest" and step["decision"] == "number typed" for step in plain.trace)


def test_a_clear_message_gets_its_draft(service):
    clear = ask(service, "How do I track my order?")
    assert clear.served == "draft" and clear.sources[0].answer_id == "track_order"


def test_a_margin_of_zero_switches_the_question_off(settings, demo_kb, tmp_path):
    off = settings.model_copy(update={"clarify_margin": 0.0})
    answered = ask(make_runtime(off, fresh_db(tmp_path), demo_kb).service, AMBIGUOUS)
    assert answered.served == "draft" and answered.sources and not answered.suggestions


def test_the_console_counts_the_questions_and_the_choices_picked(service):
    from console import stats
    from ops.logframes import load_requests

    before = stats.which_one_questions(load_requests(service.db))
    asked = ask(service, AMBIGUOUS)
    ask(service, "1", asked.session_id)
    unanswered = ask(service, AMBIGUOUS)
    ask(service, "something else entirely: do you sell gift cards?", unanswered.session_id)
    after = stats.which_one_questions(load_requests(service.db))
    assert {key: after[key] - before[key] for key in after} == {"asked": 2, "followed": 2, "picked": 1}
