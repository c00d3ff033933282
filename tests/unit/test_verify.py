"""chains/verify.py: the key facts of an answer, the defects a customer must never read, and the rewrite verdict,
on the failures a new user saw (issue: answers a customer can rely on) and on a right rewrite."""

from __future__ import annotations

import csv

import pytest

from chains.answer_fit import RELEVANCE_FLOOR, off_topic
from chains.settled import settled_defect, settled_text
from chains.verify import defects, fact_report, key_facts, rewrite_verdict
from tests.conftest import REPO

ANSWERS = {row["answer_id"]: row["answer"]
           for row in csv.DictReader((REPO / "knowledge" / "demo" / "answers.csv").open(encoding="utf-8"))}
CHANGE = ANSWERS["change_order"]
SWAP = "can i swap the size on my order"


def test_key_facts_are_the_links_amounts_durations_menu_paths_and_named_options():
    facts = {(f.kind, f.text) for f in key_facts(ANSWERS["express_shipping"] + " " + CHANGE)}
    assert {("amount", "$9.90"), ("duration", "1-2 business days"), ("option", "UPS"), ("option", "Click & Collect"),
            ("path", "Account > Orders > Edit order"), ("duration", "30 days"), ("option", "processing")} <= facts
    assert ("url", "northwind.example/returns") in {(f.kind, f.text) for f in key_facts(ANSWERS["start_return"])}


def test_a_changed_menu_path_is_a_contradiction_and_a_lost_one_is_missing():
    report = fact_report(CHANGE, "Go to Account > Orders > Cancel order while it is processing, within 30 days.")
    assert [f.text for f in report.contradictions] == ["Account > Orders > Cancel order"]
    assert "Account > Orders > Edit order" in {f.text for f in report.missing} and report.recall is not None
    assert report.recall < 1


def test_a_shorter_path_on_the_way_is_no_contradiction_and_a_full_one_is_recalled():
    assert not fact_report(CHANGE, "Open Account > Orders and pick the order.").contradictions
    assert fact_report(CHANGE, CHANGE).recall == 1.0
    assert fact_report("Thanks for asking!", "Anything else?").recall is None  # nothing to keep


@pytest.mark.parametrize(("text", "kind"), [
    ("[1] Can I change my order? [2] Can I exchange an item? Draft answer: You can change items. Customers:", "echo"),
    ("<<< What is the fastest way to reach a real person at Northwind?", "echo"),
    ("The customer message is a request to start a return.", "narration"),
    ("Sure! Here's how you could respond: Before you buy, I'd be happy to help.", "narration"),
    ("Thank you for your prompt response. I understand that your order was delayed.", "narration"),
    ("I'm unable to assist with your request.", "refusal"),
    ("I'm sorry for your loss, but I'm unable to provide a gift card.", "refusal"),
    ("Returns are free. Returns are free.\nReturns are free.", "repeated"),
    ("You can return it within 30 days and", "cut_off"),
    ("您可以在30天内退货。", "language"),
    ("", "empty"),
])
def test_each_customer_visible_defect_is_found(text, kind):
    assert kind in {d.kind for d in defects(text, message="how do I return my kettle")}


def test_a_refusal_is_a_defect_only_for_an_answerable_message_and_a_claim_needs_a_source():
    assert not defects("I can't help with the weather, sorry.", message="weather tomorrow?", answerable=False)
    found = defects("Call 555-0199 today.", message="how do I return", sources=[CHANGE])
    assert [d.kind for d in found] == ["unsupported"]
    assert not defects("Returns are accepted within 30 days.", message="how do I return", sources=[CHANGE])


def test_the_rewrites_a_new_user_saw_are_rejected_with_their_reason():
    echoed = ("[1] Can I change my order? Draft answer: You can change items under Account > Orders > Cancel order "
              "released within 30 days. Customers:")
    assert rewrite_verdict(CHANGE, echoed, message=SWAP).reason.startswith("echo")
    wrong_path = ("Sure, go to Account > Orders > Cancel order while it is \"processing\"; returns are possible "
                  "within 30 days.")
    assert rewrite_verdict(CHANGE, wrong_path, message=SWAP).reason.startswith("contradiction")
    lost = "You can edit the order while it is processing."
    assert rewrite_verdict(CHANGE, lost, message=SWAP).reason.startswith("dropped")


def test_a_rewrite_that_only_adds_words_is_rejected_and_a_right_focused_one_is_accepted():
    wordy = CHANGE + " We hope this helps and wish you a lovely day with your new things."
    assert rewrite_verdict(CHANGE, wordy, message="edit order?").reason == "adds nothing but words"
    right = ("Yes: while the order is still \"processing\", go to Account > Orders > Edit order to swap the size. "
             "Once it has shipped, you can return it within 30 days.")
    assert rewrite_verdict(CHANGE, right, message=SWAP).accepted


def test_a_short_rewrite_made_of_words_from_neither_the_draft_nor_the_message_is_ungrounded():
    draft = "Please contact our support team with your order number and a photo, and we will arrange a repair."
    verdict = rewrite_verdict(draft, "The local pawn broker already opened the speaker.", message="speaker broke")
    assert verdict.reason.startswith("ungrounded")


def test_a_reply_that_parrots_the_customers_message_is_an_echo():
    message = "The driver was rude and threw a box over my fence, I want him disciplined"
    assert "echo" in {d.kind for d in defects(message + " now.", message=message)}
    assert "echo" not in {d.kind for d in defects("Sorry about the driver. Please report it.", message=message)}


def test_single_quoted_menu_labels_are_key_facts():
    facts = {(f.kind, f.text) for f in key_facts("Go to 'My Account', then 'Cancel Order'. Don't wait.")}
    assert {("option", "My Account"), ("option", "Cancel Order")} <= facts


def test_an_answer_whose_words_come_from_the_message_and_not_the_help_center_is_ungrounded():
    context = [ANSWERS["contact_support"]]
    assert "ungrounded" in {d.kind for d in defects("Yes, we are hiring warehouse staff at the moment.",
                                                    message="Are you hiring warehouse staff?", context=context)}
    assert not defects("Good morning! How can I help you today?", message="good morning", context=context)
    express = "Yes: express shipping with UPS delivers within 1-2 business days in the EU and costs $9.90."
    assert not defects(express, message="anything faster than standard?", context=[ANSWERS["express_shipping"]])


def test_a_chinese_reply_that_repeats_the_message_or_says_what_the_help_center_does_not_is_caught():
    zh_damaged = "请在签收后14天内通过“我的账户 > 订单 > 报告问题”反馈商品损坏，并附上1-3张商品和包装的照片。"
    assert "echo" in {d.kind for d in defects("好的无聊啊，陪我聊会儿天", message="好无聊啊，陪我聊会儿天")}
    assert "ungrounded" in {d.kind for d in defects("人工智能确实会取代人类。", message="你觉得人工智能会取代人类吗",
                                                    context=[zh_damaged])}
    assert not defects("商品损坏请在签收后14天内反馈，并附上商品和包装的照片。", message="杯子碎了", context=[zh_damaged])


def test_a_plain_statement_the_help_center_does_not_make_is_ungrounded_even_in_a_grounded_answer():
    """A sentence is a claim too: "The packaging is plastic-free." holds no link, amount or duration for the claim
    check, and its two words are too few for the whole-answer share; each sentence is judged on its own."""
    context = [ANSWERS["express_shipping"]]
    found = defects("Express shipping with UPS costs $9.90. The packaging is plastic-free.",
                    message="is your packaging plastic-free?", context=context)
    assert [(d.kind, d.detail) for d in found] == [("ungrounded", "The packaging is plastic-free.")]
    assert not defects("Express shipping with UPS delivers within 1-2 business days and costs $9.90.",
                       message="is there a faster option?", context=context)


def test_an_answer_about_something_else_is_off_topic_unless_it_shares_a_word_with_the_message():
    floor = RELEVANCE_FLOOR["minilm"]
    student = "Students get 10% off with Northwind Student."
    wrong = off_topic("do you ever get tired of answering questions all day?", student, floor - 0.1, "minilm")
    assert wrong is not None and wrong.kind == "off_topic"
    assert off_topic("do you ever get tired?", student, floor + 0.01, "minilm") is None  # similar enough
    assert off_topic("is there a student discount?", student, floor - 0.1, "minilm") is None  # shares "student"
    assert off_topic("do you ever get tired?", student, 0.0, "an-encoder-without-a-floor") is None


def test_a_cost_question_answered_without_an_amount_or_free_is_unanswered():
    how_to_cancel = "You can cancel it in your order details with the Cancel Order button."
    asked = "What would it cost me to cancel now that the order has already been dispatched?"
    assert "unanswered" in {d.kind for d in defects(how_to_cancel, message=asked)}
    assert "unanswered" not in {d.kind for d in defects("Cancelling is free until the order ships.", message=asked)}
    assert "unanswered" not in {d.kind for d in defects("Express shipping costs $9.90.", message="how much is express?")}
    assert "unanswered" not in {d.kind for d in defects(how_to_cancel, message="how do I cancel my order?")}


def test_a_question_answered_with_courtesy_alone_is_unanswered_and_small_talk_answered_so_is_not():
    def kinds(answer: str, message: str) -> set[str]:
        return {d.kind for d in defects(answer, message=message, answerable=False)}

    assert "unanswered" in kinds("Thank you!", "how do you say thank you in Japanese")
    assert "unanswered" in kinds("Sure! How can I help?", "what is your returns address please")
    assert "unanswered" not in kinds("Great! I'm here to help. What would you like to talk about?",
                                     "I'm bored, just talk to me for a bit")
    assert "unanswered" not in kinds("Yes!", "do you ship to Canada on weekends")
    assert "unanswered" not in kinds("I'm doing great, thanks for asking!", "how are you?")
    assert "unanswered" not in kinds("Returns go to Northwind, 12 Dock Road.", "what is your returns address please")


def test_a_help_center_answer_copied_whole_is_found_and_one_adapted_to_the_message_is_not():
    from chains.answer_fit import copied_answer

    wrong_item = ("Sorry about the mix-up! Report it within 14 days of delivery under Account > Orders > Report a "
                  "problem, and we'll email you a free return label.")
    review = "Please go to the product page on our site and click the Write a Review button."
    assert copied_answer(wrong_item, [review, wrong_item]) == wrong_item[:80]
    assert copied_answer(f"{wrong_item}\n\nSources: [1] I received the wrong item", [wrong_item])
    adapted = "Sure! Open the headphones' page on our site, then press Write a Review to rate them."
    assert copied_answer(adapted, [review]) == ""
    assert copied_answer("Sorry about the mix-up!", [wrong_item]) == ""  # too short to call a copy
    zh = "抱歉给您发错了货！请在签收后14天内通过“我的账户 > 订单 > 报告问题”反馈，我们会通过邮件发送免费退货标签。"
    assert copied_answer(zh, [zh + "您反馈后，我们会立即用加急配送免费寄出正确的商品。"])


def test_a_short_question_answered_with_itself_is_an_echo_and_a_returned_greeting_is_not():
    assert "echo" in {d.kind for d in defects("Tracking link for my order?", message="tracking link for my order?")}
    assert "echo" not in {d.kind for d in defects("Good night!", message="good night")}


def test_a_judgement_the_help_center_does_not_make_is_ungrounded():
    payment = "We accept Visa, Mastercard and PayPal. Students get 10% off with a verified student account."
    found = defects("The best student account in Germany is the Mastercard.", message="best student account?",
                    context=[payment])
    assert ("ungrounded", "The best student account in Germany is the Mastercard.") in {(d.kind, d.detail) for d in found}
    assert not defects("Students get 10% off with a verified student account.", message="student discount?",
                       context=[payment])


def test_the_shop_name_is_not_a_key_fact_whatever_the_shop_is_called():
    draft = "Returns are free within 30 days, and Acme Outfitters pays the label via Klarna."
    assert {f.text for f in key_facts(draft, "Acme Outfitters") if f.kind == "option"} == {"Klarna"}
    assert "Acme Outfitters" in {f.text for f in key_facts(draft) if f.kind == "option"}  # no shop given: a name
    kept = "Returns are free within 30 days; we pay the label via Klarna."
    assert rewrite_verdict(draft, kept, message="are returns free?", shop="Acme Outfitters").reason != \
        "dropped: option 'Acme Outfitters' of the draft"
    assert not fact_report(draft, kept, "Acme Outfitters").missing


def test_only_the_stand_in_words_the_check_wrote_ground_an_answer():
    from chains.check import STAND_INS, written_stand_ins

    cancel = ANSWERS["cancel_order"]
    message = "please help me call off a purchase I made this morning"
    closing = "If you have any questions about an order, please contact customer support."
    # the model's own "contact customer support" is not in the help-center text it was given
    assert "ungrounded" in {d.kind for d in defects(closing, message=message, context=[cancel])}
    assert written_stand_ins([("url", "draft"), ("amount", "draft")]) == []  # the check wrote nothing
    # where the check replaced an email address, its stand-in words are its own, and they ground the line
    stand_ins = written_stand_ins([("email", "remove"), ("phone", "remove")])
    assert stand_ins == [STAND_INS["email"]]
    written = f"If you have any questions about an order, please contact {STAND_INS['email']}."
    assert "ungrounded" not in {d.kind for d in defects(written, message=message, context=[cancel, *stand_ins])}


def test_a_question_said_back_as_a_statement_is_an_echo_and_a_yes_or_no_said_in_full_is_not():
    message = "is expedited shipping actually more reliable than standard or just faster"  # make eval, 2026-12-05
    assert "echo" in {d.kind for d in defects("Expedited shipping is more reliable than standard or just faster.",
                                              message=message)}
    assert "echo" in {d.kind for d in defects("The 2-in-1 laptop is much heavier than the regular model.",
                                              message="is the 2-in-1 laptop much heavier than the regular model")}
    answered = [  # (question, a whole-sentence answer made of its words): a yes, a no, one side of a choice
        (message, "Yes, expedited shipping is more reliable than standard."),
        ("Can I return sale items in store?", "You can return sale items in any of our stores."),
        ("Do you ship to Canada on weekends?", "We don't ship to Canada on weekends."),
        ("Can orders be cancelled after shipping?", "Orders can not be cancelled after shipping."),
        ("Is the cotton shirt machine washable or hand wash only?", "The cotton shirt is machine washable."),
        ("which is warmer, the wool duvet or the cotton one", "The wool duvet is warmer."),
        ("可以退货吗？", "可以退货。"),
    ]
    for question, answer in answered:
        assert "echo" not in {d.kind for d in defects(answer, message=question)}, answer


def test_a_defect_in_a_finished_sentence_is_settled_and_one_in_an_unfinished_sentence_waits():
    narrating = "The customer wants to change the size of the order. You can"
    assert settled_defect(narrating, message=SWAP, context=[CHANGE]).kind == "narration"
    assert settled_defect("You can change it while the customer", message=SWAP, context=[CHANGE]) is None
    assert settled_text("Shipping costs $4.90 at northwind.example and takes 3.5") == ""  # no end with a space after
    assert settled_text("我们免费退货。您可以") == "我们免费退货。"
    # A full stop counts once the space after it has arrived (the chain gives the whole text written so far).
    echoed = "Based on the help-center context, the cotton towels suit a guest bathroom."
    assert settled_defect(echoed, message="which towels for guests?", context=[CHANGE]) is None
    assert settled_defect(echoed + " They", message="which towels for guests?", context=[CHANGE]).kind == "echo"


def test_every_settled_defect_is_one_the_whole_answer_has_whatever_follows():
    context = [CHANGE]
    starts = ["The customer is asking to swap a size. ", "I'm unable to assist with that request. ",
              "Help-center context: orders can be edited. ", "Our new flagship store opens in Berlin next spring. "]
    for start in starts:
        found = settled_defect(start, message=SWAP, context=context)
        assert found is not None, start
        for tail in ("", "You can edit it under Account > Orders > Edit order while it is processing.",
                     "Anything else?"):
            assert found.kind in {d.kind for d in defects(start + tail, message=SWAP, context=context)}, start + tail


def test_what_only_the_whole_answer_can_show_is_not_settled():
    # A question said back, a cost question not yet answered: the next sentence may still answer it.
    assert settled_defect("You want to swap the size on your order. ", message=SWAP, context=[CHANGE]) is None
    assert settled_defect("Express shipping is available. ", message="how much is express shipping",
                          context=[ANSWERS["express_shipping"]]) is None
    # Without help-center text nothing is judged ungrounded, as in the whole answer.
    assert settled_defect("Our new flagship store opens in Berlin next spring. ", message=SWAP, context=[]) is None


BLANKET = "do you have a blue throw blanket under $50?"
STUDENT_REWRITE = "Yes, students get 10% off with Northwind Student, applied automatically at checkout for 12 months."
WARRANTY_QUESTION = "how long is the garantee on the power bank"
WARRANTY_REWRITE = "The power bank has a 2-year warranty from the date of delivery; you don't need to register it."


def _similarity(encoder, message: str, answer: str) -> float:
    import numpy as np

    query, passage = encoder.encode_queries([message])[0], encoder.encode_answer(answer)
    return float(query @ passage / (np.linalg.norm(query) * np.linalg.norm(passage)))


def test_the_student_discount_rewrite_does_not_answer_the_blanket_question_and_a_right_rewrite_does(encoder):
    """The demo case of issue 57: the rewrite of the student-discount draft to "do you have a blue throw blanket under
    $50?" is rejected (the price the question names is not spoken to), and so is its draft; a right rewrite of the
    warranty answer passes the same check with the real encoder's similarity."""
    from chains.answer_fit import misses_the_question

    verdict = rewrite_verdict(ANSWERS["student_discount"], STUDENT_REWRITE, message=BLANKET, shop="Northwind Goods")
    assert not verdict.accepted and verdict.reason.startswith("unanswered")
    for wrong in (STUDENT_REWRITE, ANSWERS["student_discount"]):
        missed = misses_the_question(BLANKET, wrong, _similarity(encoder, BLANKET, wrong), encoder.name)
        assert missed is not None and missed.kind == "unanswered"
    assert rewrite_verdict(ANSWERS["warranty_length"], WARRANTY_REWRITE, message=WARRANTY_QUESTION,
                           shop="Northwind Goods").accepted
    similarity = _similarity(encoder, WARRANTY_QUESTION, WARRANTY_REWRITE)
    assert misses_the_question(WARRANTY_QUESTION, WARRANTY_REWRITE, similarity, encoder.name) is None


def test_a_named_price_or_size_must_be_spoken_to_or_refused():
    from chains.verify import unanswered_slot

    assert unanswered_slot(BLANKET, "Yes, our Nordic throw in blue costs $39.") == ""
    assert unanswered_slot(BLANKET, "Sorry, we don't sell throw blankets.") == ""  # a no answers it
    assert unanswered_slot(BLANKET, "Our throws start at $29.") == ""  # a colour is no slot (chains/verify.py)
    assert "a size" in unanswered_slot("is the linen shirt available in size XL?", "The linen shirt is machine washable.")
    assert unanswered_slot("is the linen shirt available in size XL?", "The linen shirt comes in sizes S to XXL.") == ""
    assert unanswered_slot("I want a blue one under $50", "Students get 10% off.") == ""  # no question asked


def test_served_answers_that_do_not_answer_are_counted_by_the_labels():
    """make eval's figure over the labelled demo answers: the served LLM text labelled "no" is counted (the hospital
    sweater in both runs' words, not the cancel steps nor the chat offered to a bored customer), an answer whose
    text changed since labelling is unlabelled, and the offer of a person and the question "which one?" are no
    answers to label."""
    from offline.answer_eval import ANSWER_LABELS, answer_labels
    from offline.answer_report import not_answering

    labelled = list(csv.DictReader(ANSWER_LABELS.open(encoding="utf-8")))
    records = [{"query_id": r["query_id"], "served": r["served"], "answer": r["answer"]} for r in labelled]
    offer = {"query_id": "demo-0250", "served": "human_offer", "answer": "A colleague can take over."}
    asked = {"query_id": "demo-0012", "served": "clarify", "answer": "Which of these do you mean?"}
    figure = not_answering([*records, offer, asked], answer_labels())
    assert figure["llm_text"] == {"rate": 0.5, "count": 2, "of": 4}
    assert figure["served"] == {"rate": round(25 / 115, 4), "count": 25, "of": 115} and figure["unlabelled"] == 0
    assert not_answering([dict(records[0], answer="something else")], answer_labels())["unlabelled"] == 1
