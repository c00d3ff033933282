"""`make eval`'s clarify measures (offline/clarify_eval.py): a question counts as right only when the right answer is
among its options, and a question without it is a miss in the small tier's precision."""

from __future__ import annotations

from offline.clarify_eval import clarify_markdown, clarify_report
from offline.datasets import Query


def record(route: str, top: str, options: tuple[str, ...] = ()) -> dict:
    return {"route": route, "answer_id": top, "options": list(options)}


def test_a_question_is_right_only_with_the_right_answer_among_its_options_and_a_miss_without_it():
    queries = [Query("a", 0, "x"), Query("b", 0, "y"), Query("c", 0, "z"), Query("d", 0, "w"), Query("e", 1)]
    off = [record("small", "x"), record("small", "q"), record("small", "q"), record("llm", "w"), record("llm", "")]
    on = [record("small", "x"), record("clarify", "q", ("q", "y")), record("clarify", "q", ("q", "r")),
          record("llm", "w"), record("clarify", "x", ("x", "v"))]
    report = clarify_report(off, on, queries)
    assert report["n_asked"] == 2 and report["ask_rate"] == 0.5 and report["oos_ask_rate"] == 1.0
    assert report["right_among_options"] == 0.5 and report["top_answer_wrong_but_offered"] == 1
    assert report["small_precision_off"] == round(1 / 3, 4)   # x right; the two q drafts wrong
    assert report["small_precision_on"] == round(2 / 3, 4)    # x, and the question offering y; the other a miss
    assert report["in_scope_to_llm_on"] == 0.25
    assert "| right answer among the options, when it asks | 0.500 |" in clarify_markdown({"heldout": report}, "d")
