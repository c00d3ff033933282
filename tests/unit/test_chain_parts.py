"""Pure parts of the chain: guard, PII masking, features, rate limit, cache rules (real MiniLM), answer templates."""

from pathlib import Path

import numpy as np
import pytest

from chains.answers import draft_answer, fill_template
from chains.cache import ResponseCache
from chains.features import message_features, negation_signature
from chains.guard import check_input
from chains.rules import parse_rules
from chains.state import MemoryState
from core.pii import find_pii, mask, order_ids
from knowledge.base import Hit


@pytest.mark.parametrize("text,reason", [("", "empty"), ("   \n\t ", "empty"), (None, "empty"),
                                         ("\x01\x02\x03", "only control characters"), ("a" * 5000, "too long")])
def test_guard_refusals(text, reason):
    result = check_input(text, 4000)
    assert result.reason == reason and result.refusal and not result.text


def test_guard_keeps_text_and_strips_controls():
    result = check_input("where is\x00 my   order?\x07 退货 😀 مرحبا", 4000)
    assert result.text == "where is my order? 退货 😀 مرحبا" and not result.refusal


def test_pii_found_and_masked():
    text = "order NW-104233, mail bob@example.com or call +44 20 7946 0958"
    assert set(find_pii(text)) >= {"order", "email", "phone"}
    masked = mask(text)
    assert "NW-104233" not in masked and "bob@example.com" not in masked and "7946" not in masked
    assert not find_pii("how do I reset my password?")


def test_pii_next_to_chinese_characters_is_found_and_masked():
    text = "我的订单NW-104233到哪了？邮箱是bob@example.com请回复，电话13800138000"
    assert order_ids(text) == ["NW-104233"]
    masked = mask(text)
    assert masked == "我的订单[order]到哪了？邮箱是[email]请回复，电话[phone]"


def test_features_read_the_message():
    f = message_features("Why was I charged twice?? This is unacceptable, and if you don't refund me I'll "
                         "compare with other shops", has_history=False)
    assert f["q_why"] == 1 and f["complaint"] == 1 and f["negation"] == 1 and f["conditional"] == 1
    assert f["q_compare"] == 1 and f["n_clauses"] > 0.5
    assert message_features("and how long does that take?", has_history=True)["follow_up"] == 1
    assert message_features("and how long does that take?", has_history=False)["follow_up"] == 0


def test_distinct_actions_are_counted_once_each_in_either_language():
    from chains.features import action_count

    assert action_count("how do i cancel my order") == 1
    assert action_count("not cancel, change it: cancel nothing") == 2  # "cancel" twice is one action
    assert action_count("what is your address?") == 0  # "address" is not "add"
    assert action_count("cancel order 71102, refund half to my card and send the rest to my sister") == 3
    assert action_count("一个订单想取消，另一个想改地址，剩下的合并成一个包裹") == 3


def test_a_router_trained_before_a_feature_was_added_still_scores_on_its_own_columns():
    from chains.routers.base import RouteContext
    from chains.routers.evidence import ROUTE_NAMES, EvidenceRouter, router_inputs

    hit = Hit(answer_id="cancel_order", answer="You can cancel an order ...", title="Cancel an order", score=0.62,
              matched_text="cancel my order", source="faq")
    context = RouteContext(hits=[hit], evidence={"dense_top": 0.7, "dense_margin": 0.1})
    query = "cancel order 71102 and refund half to my card"
    own = [name for name in ROUTE_NAMES if name != "n_actions"]  # a logistic router from before n_actions
    coef = np.linspace(-1, 1, len(own))
    older = {"evidence": {"route": {"inputs": own, "mean": [0.1] * len(own), "scale": [2.0] * len(own),
                                    "coef": coef.tolist(), "intercept": -0.5}}}
    x = np.delete(router_inputs(query, context), ROUTE_NAMES.index("n_actions"))
    z = ((x - 0.1) / 2.0) @ coef - 0.5
    assert EvidenceRouter(older).score(query, context) == pytest.approx(1 / (1 + np.exp(-z)))
    older["evidence"]["route"]["inputs"] = [*own[:-1], "no_such_feature"]
    with pytest.raises(ValueError, match="retrain it with `tandem router train`"):
        EvidenceRouter(older)


def test_the_exported_trees_score_every_row_as_the_fitted_model_does():
    """The router's trees leave sklearn as plain JSON arrays; read back by TreeModel they must give sklearn's
    probabilities, monotone constraints included."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from chains.routers.evidence import TreeModel
    from offline.router_fit import MONOTONE, TREE_PARAMS, _fit_trees

    rng = np.random.default_rng(3)
    names = ["dense_top", "oos_gap", "n_words"]
    x = rng.normal(size=(600, 3))
    y = (x[:, 1] - x[:, 0] + 0.5 * np.sin(3 * x[:, 2]) + rng.normal(scale=0.3, size=600) > 0).astype(int)
    weight = rng.uniform(0.5, 2.0, size=600)
    block = {**_fit_trees(x, y, weight, names), "inputs": names}
    reference = HistGradientBoostingClassifier(monotonic_cst=[MONOTONE.get(n, 0) for n in names], **TREE_PARAMS)
    expected = reference.fit(x, y, sample_weight=weight).predict_proba(x)[:, 1]
    model = TreeModel(block, tuple(names))
    assert np.allclose(1 / (1 + np.exp(-model.logits(x))), expected, atol=1e-12)
    assert model.probability(x[0]) == pytest.approx(expected[0], abs=1e-12)
    # dense_top may only lower p_llm: raising it on every row never raises a score
    assert (model.logits(x + np.array([1.0, 0, 0])) <= model.logits(x) + 1e-12).all()


def test_the_rewrite_threshold_keeps_each_handwritten_group_within_the_budget():
    from offline.router_fit import REWRITE_GROUPS, RIGHT_DRAFT_REWRITE_BUDGET, rewrite_threshold

    surer, less_sure = REWRITE_GROUPS[:2]
    rng = np.random.default_rng(5)
    p_right = np.concatenate([rng.uniform(0.6, 1.0, 400), rng.uniform(0.2, 1.0, 200), rng.uniform(0.0, 0.3, 50)])
    correct = np.array([1] * 600 + [0] * 50)
    groups = np.array([surer] * 400 + [less_sure] * 200 + [less_sure] * 50)
    threshold = rewrite_threshold(p_right, correct, groups)
    for name in (surer, less_sure):
        right = p_right[(groups == name) & (correct == 1)]
        assert (right < threshold).mean() <= RIGHT_DRAFT_REWRITE_BUDGET + 1e-9
    # pooled, the surer group's drafts would have let the less sure group rewrite more than the budget
    pooled = float(np.quantile(p_right[correct == 1], RIGHT_DRAFT_REWRITE_BUDGET))
    assert (p_right[(groups == less_sure) & (correct == 1)] < pooled).mean() > RIGHT_DRAFT_REWRITE_BUDGET


def test_negation_signature():
    assert negation_signature("cancel my order") != negation_signature("I do not want to cancel my order")


@pytest.mark.slow
def test_cache_exact_semantic_ttl_and_rules(encoder):
    e = encoder
    cache = ResponseCache(MemoryState(), ttl_s=3600)
    v = e.encode_query("how do I reset my password")
    assert cache.store("how do I reset my password", v, "kb1", {"answer": "Use the reset link."})
    assert cache.lookup("How do I reset my password?", v, "kb1", 0.95).kind == "exact"
    para = e.encode_query("how can i reset my password")
    hit = cache.lookup("how can i reset my password", para, "kb1", 0.9)
    assert hit is not None and hit.kind == "semantic"
    assert cache.lookup("how do I reset my password", v, "kb2", 0.95) is None  # other KB version
    assert not cache.store("reset password for bob@example.com", v, "kb1", {"answer": "x"})
    assert not cache.store("my password", v, "kb1", {"answer": "sent to bob@example.com"})
    shop = ResponseCache(MemoryState(), ttl_s=3600, shop_addresses=("help@shop.example",))
    assert shop.store("my password", v, "kb1", {"answer": "write to help@shop.example"})  # the shop's own address
    assert not shop.store("my password", v, "kb1", {"answer": "write to help@shop.example or bob@example.com"})
    neg = e.encode_query("I do not want to reset my password")
    assert float(neg @ v) > 0.8  # close in embedding space, still never served
    assert cache.lookup("I do not want to reset my password", neg, "kb1", 0.8) is None
    expiring = ResponseCache(MemoryState(), ttl_s=0)
    expiring.store("hello there", v, "kb1", {"answer": "hi"})
    assert expiring.lookup("hello there", v, "kb1", 0.9) is None
    assert np.isclose(np.linalg.norm(v), 1, atol=1e-4)


@pytest.mark.parametrize("query, template, expected", [
    ("cancel NW-104233 please", "Order {order_id} can be cancelled", "Order NW-104233 can be cancelled"),
    ("how do i cancel my order", "Order {order_id} can be cancelled", "Your order can be cancelled"),
    ("how do i cancel my order", "You can track order {order_id} under Account", "You can track your order under Account"),
    ("how do i cancel my order", "Items from {order_id} ship", "Items from your order ship"),
    ("如何取消订单", "订单{order_id}在状态仍为“处理中”时可以取消", "您的订单在状态仍为“处理中”时可以取消"),
    ("取消订单 NW-104233", "订单{order_id}在状态仍为“处理中”时可以取消", "订单NW-104233在状态仍为“处理中”时可以取消"),
])
def test_answer_templates_read_well_with_and_without_an_order_number(query, template, expected):
    assert fill_template(template, query) == expected


@pytest.mark.parametrize("query, answer, title, label", [
    ("how do i cancel", "Order {order_id} can be cancelled in your account.", "How do I cancel my order?", "Sources: "),
    ("如何取消订单", "订单{order_id}可以在账户中取消。", "怎么取消订单？", "来源："),
])
def test_a_draft_cites_its_source_in_the_language_of_the_answer(query, answer, title, label):
    hit = Hit(answer_id="cancel_order", answer=answer, title=title, score=0.9, matched_text=title, source="faq.csv")
    draft = draft_answer(query, [hit])
    assert draft.text.endswith(f"\n\n{label}[1] {title}")
    assert [s["answer_id"] for s in draft.sources] == ["cancel_order"]


SHIPPED_RULES = parse_rules((Path(__file__).parents[2] / "chains" / "rules.yaml").read_text(encoding="utf-8"))


def _rule_for(text: str) -> str | None:
    return next((rule.name for rule in SHIPPED_RULES if rule.matches(text)), None)


@pytest.mark.parametrize("text", ["Where is my order NW-104233?", "What is the status of order NW-104871?",
                                  "track my package NW-104233 please", "has NW-104871 shipped yet?",
                                  "When will order NW-104233 arrive?", "is NW-104233 arriving today",
                                  "when will i get NW-104233", "ETA for NW-104233?", "订单NW-104233到哪了？",
                                  "NW-104233的物流"])
def test_a_status_question_with_an_order_number_reads_the_order(text):
    assert _rule_for(text) == "order-status"


@pytest.mark.parametrize("text", ["cancel order NW-105390 please", "i want to return the mugs from order NW-104233",
                                  "can i change the delivery address for NW-105390", "the details of NW-105390",
                                  "is there anywhere to see NW-105390's invoice",
                                  "取消订单NW-105390", "order NW-105390. How do I reset my password?"])
def test_other_questions_that_name_an_order_go_to_the_router(text):
    assert _rule_for(text) is None


@pytest.mark.parametrize("text", ["I will get a lawyer if this is not fixed", "I'll file a chargeback with my bank",
                                  "再不退款我就找律师起诉你们", "你们再不退款我就去法院告你们"])
def test_a_legal_threat_in_either_language_is_handed_to_a_person_with_its_reason(text):
    rule = next(rule for rule in SHIPPED_RULES if rule.matches(text))
    assert (rule.name, rule.route, rule.reason) == ("legal-threat", "handoff", "a legal threat: a person handles it")


@pytest.mark.parametrize("text", ["this is fraud", "我的卡被盗刷了，买了我没买过的东西"])
def test_fraud_topics_in_either_language_go_to_the_llm(text):
    assert _rule_for(text) == "fraud"


@pytest.mark.parametrize("text", ["hi", "Hello!", "hi there, how are you today?", "thanks so much, you've been really "
                                  "helpful!", "thanks, that's all", "good morning! hope you're well", "Thank you!!",
                                  "ok, thank you for your help", "bye!", "谢谢你的帮助！", "你好，今天过得怎么样？", "您好",
                                  "再见！"])
def test_a_message_of_courtesy_alone_gets_the_courtesy_reply(text):
    assert _rule_for(text) == "courtesy"


@pytest.mark.parametrize("text", ["hi, where is my order?", "hello, I have a few questions", "thanks, and returns?",
                                  "thank you!! super quick answers", "how do you say thank you in Japanese",
                                  "thanks for nothing I guess", "great, how do I return it?", "hiring?",
                                  "你好，我的包裹在哪里？", "好的，怎么退货？"])
def test_courtesy_with_anything_more_goes_to_the_router(text):
    assert _rule_for(text) is None


@pytest.mark.parametrize("text", ["are you a real person or a bot?", "Are you a bot?", "am I talking to a real person?",
                                  "is this a bot?", "hi, are you an AI?", "你是机器人吗？", "你是机器人还是真人",
                                  "您是人工客服吗"])
def test_asking_whether_it_is_a_machine_gets_the_assistants_own_answer(text):
    assert _rule_for(text) == "assistant-identity"


@pytest.mark.parametrize("text", ["are you a bot? where is my parcel", "are you open on sunday?",
                                  "is this a real leather bag?", "are you a person who can help with returns?", "转人工"])
def test_a_question_that_only_starts_like_are_you_a_bot_goes_on(text):
    assert _rule_for(text) != "assistant-identity"


def test_the_assistant_says_it_is_automated_and_how_to_reach_a_person_in_the_customers_language():
    from chains.rules import ASSISTANT_REPLIES, assistant_identity

    english, chinese = assistant_identity("are you a bot?", "", None), assistant_identity("你是机器人吗？", "", None)
    assert english.answer == ASSISTANT_REPLIES["en"] and "automated assistant" in english.answer
    assert "Talk to a human" in english.answer and chinese.answer == ASSISTANT_REPLIES["zh"]
    assert "自动客服助手" in chinese.answer


@pytest.mark.parametrize("text, kind, language", [
    ("hi there", "greeting", "en"), ("how are you today?", "how_are_you", "en"), ("thanks a lot!", "thanks", "en"),
    ("thanks, that's all", "bye", "en"), ("您好", "greeting", "zh"), ("谢谢你的帮助！", "thanks", "zh"),
    ("你好，今天过得怎么样？", "how_are_you", "zh")])
def test_the_courtesy_reply_fits_the_message_and_its_language(text, kind, language):
    from chains.rules import COURTESY_REPLIES, courtesy

    result = courtesy(text, "", None)
    assert result.detail == {"kind": kind} and result.answer == COURTESY_REPLIES[language][kind]
