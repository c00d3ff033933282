"""`make eval`'s comparison of the learned scores with the plain baselines the routing issue names."""

from __future__ import annotations

from offline.datasets import Query
from offline.evaluate import _baseline_rows, _comparison, baseline_report


def _record(answer_id: str, p_llm: float, dense_top: float, kb_top: float, kb_margin: float,
            draft_quality: float) -> dict:
    return {"answer_id": answer_id, "p_llm": p_llm, "dense_top": dense_top, "kb_top": kb_top,
            "kb_margin": kb_margin, "draft_quality": draft_quality}


def test_baseline_report_scores_each_score_on_the_pairs_it_is_meant_to_separate():
    queries = [Query("a", 0, "refund", "t"), Query("b", 0, "refund", "t"), Query("c", 0, "cancel", "t"),
               Query("d", 1, "", "t"), Query("e", 1, "", "t")]
    records = [
        # in scope: the learned p_llm is low for all three; max-cosine is fooled by "c" (far, though answerable)
        _record("refund", 0.1, 0.9, 0.8, 0.30, 0.9),
        _record("cancel", 0.2, 0.8, 0.9, 0.05, 0.2),  # wrong top answer: learned draft quality says so
        _record("cancel", 0.3, 0.2, 0.7, 0.20, 0.8),
        # out of scope: high p_llm; one sits close to a stored question
        _record("refund", 0.8, 0.85, 0.6, 0.1, 0.5),
        _record("cancel", 0.9, 0.1, 0.5, 0.1, 0.5),
    ]
    report = baseline_report(records, queries)
    assert report["route_learned"] == 1.0          # every out-of-scope p_llm above every in-scope one
    # max-cosine ranks 4 of 6 (out, in) pairs right: "d" is closer than "b" and "c", "e" is the farthest of all
    assert report["route_max_cosine"] == 0.6667
    assert report["route_kb_top"] == 1.0
    # right vs wrong top answer, in-scope messages only (2 right, 1 wrong)
    assert report["draft_learned"] == 1.0
    assert report["draft_kb_top"] == 0.0           # the wrong draft has the highest top score
    assert report["draft_kb_margin"] == 1.0


def test_baseline_report_leaves_out_what_a_set_cannot_measure():
    queries = [Query("a", 0, "refund", "t"), Query("b", 0, "cancel", "t")]
    records = [_record("refund", 0.1, 0.9, 0.8, 0.3, 0.9), _record("refund", 0.2, 0.8, 0.7, 0.2, 0.4)]
    report = baseline_report(records, queries)
    assert report["route_learned"] is None and report["route_max_cosine"] is None  # no out-of-scope message
    assert report["draft_learned"] == 1.0
    rows = _baseline_rows("Bitext test", {"baselines": report})
    assert [row[0] for row in rows] == ["Bitext test: right vs wrong top answer (`draft_quality`)"]
    table = _comparison("T:", ("learned score", "max-cosine", "KB top score", "top-two margin"), rows)
    assert table[3:] == ["| measure | learned score | max-cosine | KB top score | top-two margin |",
                         "|---|---|---|---|---|",
                         "| Bitext test: right vs wrong top answer (`draft_quality`) | 1.000 | – | 1.000 | 1.000 |"]


def test_an_order_answered_by_the_tool_is_not_counted_as_sent_to_the_llm():
    from offline.evaluate import product_report

    queries = [Query("where is NW-104233", 0, "order_status", "t"), Query("refund?", 0, "refund", "t"),
               Query("b", 0, "cancel", "t"), Query("tell me a joke", 1, "", "t"), Query("poem", 1, "", "t")]
    records = [{**_record("", 1.0, 0.0, 0.0, 0.0, 0.0), "route": "tool", "rewrite": False},
               {**_record("refund", 0.1, 0.9, 0.8, 0.3, 0.9), "route": "small", "rewrite": False},
               {**_record("cancel", 0.2, 0.8, 0.6, 0.1, 0.3), "route": "llm", "rewrite": True},  # a rewrite
               {**_record("refund", 0.9, 0.2, 0.4, 0.1, 0.5), "route": "llm", "rewrite": False},
               {**_record("refund", 0.1, 0.7, 0.7, 0.1, 0.8), "route": "small", "rewrite": False}]
    report = product_report(records, queries)
    assert report["in_scope_to_llm"] == round(1 / 3, 4)  # the rewrite only; the tool's answer is no LLM call
    assert report["oos_to_llm"] == 0.5


def test_an_out_of_scope_message_a_rule_answers_counts_as_handled_like_the_llms():
    from offline.evaluate import product_report

    queries = [Query("refund?", 0, "refund", "t"), Query("thanks, that's all", 1, "", "t"),
               Query("tell me a joke", 1, "", "t"), Query("poem", 1, "", "t")]
    records = [{**_record("refund", 0.1, 0.9, 0.8, 0.3, 0.9), "route": "small", "rewrite": False},
               {**_record("", 1.0, 0.0, 0.0, 0.0, 0.0), "route": "tool", "rewrite": False},  # the courtesy reply
               {**_record("refund", 0.9, 0.2, 0.4, 0.1, 0.5), "route": "llm", "rewrite": False},
               {**_record("refund", 0.1, 0.7, 0.7, 0.1, 0.8), "route": "small", "rewrite": False}]
    assert product_report(records, queries)["oos_to_llm"] == round(2 / 3, 4)
