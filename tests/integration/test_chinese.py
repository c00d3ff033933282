"""Chinese customers through the whole chain: the demo shop in both languages with the e5 space for Chinese (as
`tandem serve` builds it), the real router, and the real vLLM server for the LLM path."""

from __future__ import annotations

import re

import pytest

from chains.schema import ChatRequest
from core.text import language_of
from tests.conftest import fresh_db, make_runtime

HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture()
def runtime(settings, bilingual_kb, tmp_path):
    runtime = make_runtime(settings, fresh_db(tmp_path), bilingual_kb)
    yield runtime
    runtime.close()


def ask(runtime, text: str, user: str = "zh-customer"):
    return runtime.service.answer(ChatRequest(message=text, user_id=user, session_id=f"zh-{text[:20]}"))


def test_a_chinese_question_is_answered_from_the_chinese_faq_on_the_small_tier(runtime):
    response = ask(runtime, "退货政策是什么？")
    assert response.route == "small" and response.sources[0].answer_id == "zh_return_policy"
    assert language_of(response.answer) == "zh"


def test_traditional_characters_get_the_chinese_answer(runtime):
    response = ask(runtime, "退貨政策是什麼？")  # the simplified question above, in traditional characters
    assert response.route == "small" and response.sources[0].answer_id == "zh_return_policy"
    assert language_of(response.answer) == "zh" and HAN.search(response.answer)


def test_full_width_latin_is_read_like_ascii(runtime):
    wide, plain = ask(runtime, "ｈｏｗ　ｄｏ　Ｉ　ｔｒａｃｋ　ｍｙ　ｏｒｄｅｒ？"), ask(runtime, "how do I track my order?")
    assert wide.sources[0].answer_id == plain.sources[0].answer_id == "track_order"


@pytest.mark.parametrize("message", ["😀😃🙏", "？？？！！", "。。。……", "!!!"])
def test_only_emoji_or_punctuation_gets_a_clear_request_for_words_in_both_languages(runtime, message):
    response = ask(runtime, message)
    assert response.route == "guard" and response.reasons == ["guard: no words"]
    assert "written in words" in response.answer and "请用文字" in response.answer
    with runtime.db.session() as session:  # answered and logged like any other message
        from storage.tables import RequestLog

        assert session.get(RequestLog, response.request_id).route == "guard"


def test_a_mixed_chinese_english_message_is_chinese_and_finds_its_answer(runtime):
    response = ask(runtime, "我的 order 还没到，怎么查物流")
    # "not arrived yet" and "track the parcel" fit two answers about equally well: the small tier may ask which
    found = ([s.answer_id for s in response.suggestions] if response.served == "clarify"
             else [s.answer_id for s in response.sources][:1])
    assert "zh_track_order" in found and language_of(response.answer) == "zh", response.reasons


def test_a_chinese_message_sent_to_the_llm_is_answered_in_chinese(settings, bilingual_kb, tmp_path, llm_server):
    """The prompt names the reply language; the answer check replaces a reply in another language with the
    Chinese help-center answer, so the customer reads Chinese either way (the trace says which happened)."""
    runtime = make_runtime(settings.model_copy(update={"llm_url": llm_server.url}), fresh_db(tmp_path), bilingual_kb,
                           use_llm=True)
    try:
        runtime.policy.save({"route_threshold": 0.0}, "test", "send this one to the LLM")
        response = ask(runtime, "你们的台灯和落地灯哪个更适合卧室？")
    finally:
        runtime.close()
    assert response.route == "llm" and response.model, response.reasons
    check = next(step for step in response.trace if step["stage"] == "check")
    assert HAN.search(response.answer), response.answer
    kinds = {finding["kind"] for finding in check.get("findings", [])}
    assert language_of(response.answer.split("\n\n")[0]) == "zh" or "language" in kinds, (response.answer, check)


def test_a_chinese_message_meets_the_starter_examples_in_its_own_space(bilingual_kb):
    """Searched in the e5 space, a Chinese message that no shop answers comes closer to Tandem's starter examples
    (there in English and in Chinese) than to the FAQ, and a Chinese FAQ question does not."""
    other_company, shop_question = "我的Gmail账号登不上了，怎么找回", "我的订单到哪了"
    assert bilingual_kb.space_for(other_company) == "zh"
    near_starter, near_faq = {}, {}
    bilingual_kb.search(other_company, k=1, evidence=near_starter)
    bilingual_kb.search(shop_question, k=1, evidence=near_faq)
    assert near_starter["has_starter"] == near_faq["has_starter"] == 1.0
    assert near_starter["starter_gap"] > 0 > near_faq["starter_gap"]
