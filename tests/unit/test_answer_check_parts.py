"""The answer check's parts: which claims it sees, how values are compared, what the policy does."""

from __future__ import annotations

import pytest

from chains.answers import SYSTEM_PROMPT
from chains.check import AnswerCheck, StreamChecker, _fragments, claims

CONTEXT = ("Standard shipping takes 3-5 business days and costs $4.90, free over $50. Returns within 30 days. "
           "Track order NW-104233 at northwind.example/track. Email support@northwind.example or call "
           "+44 20 7946 0958. Students get 10% off.")


@pytest.mark.parametrize("text, kind", [
    ("see https://www.example.com/a/b", "url"), ("visit northwind.example/track", "url"),
    ("write to help@shop.example.com", "email"), ("call 1-800-555-0199", "phone"), ("it costs $4.90", "amount"),
    ("it costs 4.90 USD", "amount"), ("运费4.90美元", "amount"), ("save 15%", "percent"),
    ("within 48 hours", "duration"), ("3 to 5 business days", "duration"), ("5-10个工作日", "duration"),
    ("order NW-123456", "order")])
def test_each_kind_of_claim_is_found(text, kind):
    assert [c.kind for c in claims(text)] == [kind]


def test_claims_next_to_chinese_characters_are_read_whole():
    text = "请访问northwind.example/track，发邮件至support@northwind.example或致电4008001234，订单NW-999999已发货。"
    assert [(c.kind, c.text) for c in claims(text)] == [
        ("url", "northwind.example/track"), ("email", "support@northwind.example"), ("phone", "4008001234"),
        ("order", "NW-999999")]
    check = AnswerCheck(["请联系support@northwind.example，或在northwind.example/track查询订单NW-104233。"], "问题")
    assert [c.kind for c in check.unsupported(text)] == ["phone", "order"]


def test_values_compare_normalised_not_as_written():
    check = AnswerCheck([CONTEXT], "how long does shipping take")
    supported = ("It costs 4.90 USD and arrives in 3 to 5 business days; returns within thirty days. "
                 "Track it at https://www.northwind.example/track or write to support@northwind.example. "
                 "Call +44 (0)20 7946 0958. Students save 10 percent.")
    assert check.unsupported(supported) == []
    invented = "It costs $5.90, arrives in 2 days, see northwind-deals.com, call 0800 123 4567, order NW-999999."
    assert {c.kind for c in check.unsupported(invented)} == {"amount", "duration", "url", "phone", "order"}


def test_a_thousands_comma_is_not_read_as_a_decimal_comma():
    check = AnswerCheck(["A gift card costs $1.50 to post; the 2,50 € fee is waived."], "question")
    assert [c.text for c in check.unsupported("Posting costs $1,500.")] == ["$1,500"]
    assert check.unsupported("Posting costs $1.50 and the 2,50 € fee is waived.") == []


@pytest.mark.parametrize("invented, claim", [("Returns are accepted within thirty days.", "thirty days"),
                                             ("See northwind-deals.de for more.", "northwind-deals.de")])
def test_streaming_holds_back_every_kind_of_claim_the_check_knows(invented, claim):
    """A claim that starts with a number word or a less common domain must not stream out before it is checked."""
    stream = StreamChecker(AnswerCheck(["Returns are accepted within 14 days at northwind.example."], "question"))
    words = [w + " " for w in invented.split()]
    shown = "".join(stream.feed(w) for w in words) + stream.close()
    assert claim not in shown and [f.value for f in stream.findings] == [claim], (shown, stream.findings)


def test_prompt_echo_fragments_cover_every_full_chunk():
    assert _fragments("one two three four five six seven eight") == ["one two three four five six seven eight"]
    assert len(_fragments(" ".join(str(i) for i in range(16)))) == 2


def test_default_policy_removes_contacts_and_replaces_invented_figures():
    check = AnswerCheck([CONTEXT], "question")
    removed = check.clean("Visit https://northwind-gifts.com for vouchers.")
    assert removed.text == "Visit our website for vouchers." and not removed.replace_with_draft
    priced = check.clean("Express costs $2.50 today.")
    assert priced.replace_with_draft and priced.findings[0].kind == "amount"


def test_whole_answer_problems():
    check = AnswerCheck([CONTEXT], "how much is shipping", system_prompt=SYSTEM_PROMPT)
    cut = check.finish("Shipping costs $4.90. It is free over $50 when you", "length")
    assert cut.text == "Shipping costs $4.90." and [f.kind for f in cut.findings] == ["truncated"]
    repeated = check.finish("Shipping costs $4.90.\nShipping costs $4.90.\n[1] Shipping [1] Shipping")
    assert repeated.text.count("$4.90") == 1 and repeated.text.count("[1] Shipping") == 1
    assert check.finish("").replace_with_draft
    assert check.finish("运费是4.90美元。").findings[0].kind == "language"
    echo = check.finish(SYSTEM_PROMPT[:200])
    assert echo.replace_with_draft and "prompt_echo" in {f.kind for f in echo.findings}


@pytest.mark.parametrize("message, reply, flagged", [
    ("i was charged twice", "הצרורח להכחרקיעל עסכועם בדרחכעה, טבות.", True),      # SmolLM2 did this, 2026-12-02
    ("i was charged twice", "Вам вернут деньги в течение 5 дней.", True),
    ("我被扣了两次款", "Вам вернут деньги в течение 5 дней.", True),
    ("я заплатил дважды", "Вам вернут деньги в течение 5 дней.", False),  # the customer wrote in that script
    ("i was charged twice", "Sorry about that: the second charge is released within 3-5 days. Merci!", False),
    ("is the café open", "Our café (crème brûlée!) is open daily.", False),  # accented Latin is Latin
])
def test_a_reply_in_another_script_than_the_customers_is_in_another_language(message, reply, flagged):
    findings = AnswerCheck([CONTEXT], message).finish(reply).findings
    assert ("language" in {f.kind for f in findings}) is flagged


def test_lines_repeated_under_new_numbers_and_clauses_repeated_within_a_line_are_removed():
    check = AnswerCheck([CONTEXT], "what's your phone number")
    numbered = check.finish("[1] How do I track my order?\n[2] How do I reset my password?\n[3] How do I track my order?")
    assert numbered.text == "[1] How do I track my order?\n[2] How do I reset my password?"
    assert [f.kind for f in numbered.findings] == ["repeated"]
    looping = AnswerCheck([CONTEXT], "运费多少").finish("运费是4.90美元，我们可以在结账时显示运费，我们可以在结账时显示运费。")
    assert looping.text == "运费是4.90美元，我们可以在结账时显示运费，"
    speech = "Yes, yes, shipping costs $4.90, free over $50."
    assert check.finish(speech).text == speech and not check.finish(speech).findings  # short repeats are speech


def test_the_operator_policy_is_validated():
    from core.policy import Thresholds
    from core.settings import get_settings

    defaults = Thresholds.defaults(get_settings())
    assert defaults.check_actions["url"] == "remove" and defaults.check_actions["amount"] == "draft"
    with pytest.raises(ValueError, match="must be one of"):
        defaults.model_copy().model_validate({**defaults.model_dump(), "check_actions": {"url": "delete"}})
    with pytest.raises(ValueError, match="unknown check kind"):
        Thresholds.model_validate({**defaults.model_dump(), "check_actions": {"colour": "remove"}})
