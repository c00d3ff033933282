"""knowledge.focus: the text a message is searched by (typos mended against the KB's words, declined wishes
dropped). Pure text in, text out; the KB-level behaviour is tested with the real demo KB in
tests/integration/test_kb_knowledge_base.py."""

import pytest

from knowledge.focus import SearchFocus, Speller, drop_declined_wishes, one_edit_away

KB_TEXTS = ["How do I cancel my order?", "cancel order please", "track my parcel", "where can I track my order",
            "I want a refund", "refund for my order", "how to settle the invoice", "settle my invoice"]
ENCODER_WORDS = frozenset({"how", "do", "i", "my", "the", "kettle", "broke", "please", "mail", "charge"})


@pytest.fixture(scope="module")
def speller() -> Speller:
    return Speller(KB_TEXTS, ENCODER_WORDS)


@pytest.mark.parametrize("typo, mended", [("cancle", "cancel"), ("oredr", "order"), ("trak", "track"),
                                          ("refnd", "refund"), ("invoce", "invoice")])
def test_a_word_one_edit_from_a_kb_word_is_mended_into_it(speller, typo, mended):
    assert speller.mend(typo) == mended


@pytest.mark.parametrize("word", [
    "kettle",     # the encoder knows it, though "settle" is one edit away in the KB
    "mailing",    # its stem is known
    "charger",    # its stem is known
    "dont",       # a contraction typed without the apostrophe
    "INVOCE",     # upper case: a code or a shout, not a typo
    "lol",        # too short to call a typo
    "cnacle",     # two edits from "cancel"
])
def test_known_short_capitalised_or_distant_words_are_left_alone(speller, word):
    assert speller.mend(word) == word


def test_the_speller_keeps_everything_but_the_mended_words(speller):
    assert speller("how do i cancle order #771204, asap!!") == "how do i cancel order #771204, asap!!"


def test_one_edit_away_covers_deletion_swap_substitution_and_insertion():
    edits = one_edit_away("abc")
    assert {"ab", "bac", "abd", "abcd"} <= edits
    assert "abc" in edits  # substituting a letter by itself


@pytest.mark.parametrize("message, kept", [
    ("i don't want to change anything on the order, i want the entire thing cancelled",
     "i want the entire thing cancelled"),
    ("not cancel, just change - can i swap the mug?", "just change - can i swap the mug?"),
    ("i'm not asking for a refund right now, i just want to know when you give one",
     "i just want to know when you give one"),
    ("i dont want to replace my home address, just add my work address", "just add my work address"),
    ("I do not need a new account but I need to fix my details", "I need to fix my details"),
    ("i want a refund, not a voucher", "i want a refund"),
])
def test_a_declined_wish_is_dropped_when_the_next_clause_says_what_is_wanted(message, kept):
    assert drop_declined_wishes(message) == kept


@pytest.mark.parametrize("message", [
    "I do not want to cancel my order",                          # nothing else is asked
    "cant register, the verification email never comes",        # a symptom, not a declined wish
    "hi, i'm not sure how to actually buy it",                   # uncertainty, not a declined wish
    "i want a refund, it doesn't work",                          # negation, but no wish declined
    "I deposited a check and im not seeing it, can you look into it?",  # a symptom, not a declined wish
    "My package is late and I don't want it anymore. Can I get a refund?",  # a reason, then a question
    "League joined but not showing",                             # "not X" after a statement, not a wish
    "it's been stolen and I don't want it misused, I want this handled now",  # the clause only ends declining
    "i don't want it, ok",                                       # what remains is too short to search by
    "the app does not need my password, does it?",               # what remains is too short to search by
])
def test_messages_without_a_declined_wish_beside_a_request_are_kept_whole(message):
    assert drop_declined_wishes(message) == message


def test_focus_leaves_chinese_messages_as_written():
    focus = SearchFocus(KB_TEXTS, ENCODER_WORDS)
    assert focus("我不想取消订单，我想修改地址") == "我不想取消订单，我想修改地址"
    assert focus("how do i cancle my oredr") == "how do i cancel my order"


def test_without_the_encoder_vocabulary_spelling_is_off_but_contrast_still_applies():
    focus = SearchFocus(KB_TEXTS, frozenset())
    assert focus.speller is None
    assert focus("i don't want a refund, i want to trak my parcel") == "i want to trak my parcel"
