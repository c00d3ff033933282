"""`make eval`'s answers section: how a final answer is scored (offline/answer_report.py), how its sets are sampled
(offline/answer_eval.py), and the README table. The verification functions themselves are tested with the chain."""

from __future__ import annotations

from offline.answer_eval import Message, spread
from offline.answer_report import Outcome, markdown, reason_kind, rejection, score, set_report, summary

DRAFT = ('You can change items under Account > Orders > Edit order as long as the order status is still "processing". '
         "You can return anything within 30 days.\n\nSources: [1] Can I change my order?")
REFERENCE = DRAFT.split("\n\n")[0]
GOOD = 'Open Account > Orders > Edit order while the status is "processing"; returns are free within 30 days.'


def outcome(served: str, answer: str, *, plan: str = "small", in_scope: bool = True, top: str | None = "change_order",
            findings: list | None = None, first: float | None = 5.0, message: str = "can i change my order?") -> Outcome:
    return Outcome(set="demo", query_id="q", message=message, expected="change_order" if in_scope else "",
                   in_scope=in_scope, plan=plan, route="small" if served.startswith("draft") else "llm", served=served,
                   answer=answer, draft=DRAFT, top_answer_id=top, sources=[REFERENCE, DRAFT, message],
                   findings=findings or [], first_text_ms=first, total_ms=10.0)


def test_a_draft_is_scored_on_its_answer_alone():
    right = score(outcome("draft", DRAFT), REFERENCE)
    wrong = score(outcome("draft", DRAFT, top="track_order"), REFERENCE)
    assert right["right"] is True and wrong["right"] is False
    assert right["defects"] == [] and right["recall"] is None and right["worse_than_draft"] is None
    out_of_scope = score(outcome("draft", DRAFT, in_scope=False), None)
    assert out_of_scope["right"] is None and out_of_scope["expected"] is None


def test_a_served_rewrite_that_keeps_the_facts_is_not_worse_than_its_draft():
    record = score(outcome("rewrite", GOOD, plan="rewrite"), REFERENCE)
    assert record["recall"] == 1.0 and record["defects"] == [] and record["worse_than_draft"] == []
    assert record["draft"] == DRAFT  # kept in the record, so a person can compare


def test_a_served_rewrite_that_changes_the_path_and_echoes_the_prompt_is_worse_and_defective():
    bad = "Customer message: go to Account > Orders > Cancel order."
    record = score(outcome("rewrite", bad, plan="rewrite"), REFERENCE)
    kinds = {d["kind"] for d in record["defects"]}
    assert {"echo", "contradiction"} <= kinds
    assert record["recall"] is not None and record["recall"] < 1
    assert "Account > Orders > Edit order" in record["missing"]
    assert any("Cancel order" in why for why in record["worse_than_draft"])


def test_an_llm_answer_out_of_scope_has_no_recall_and_may_decline():
    record = score(outcome("llm", "I am unable to help with that, but a colleague can.", plan="llm", in_scope=False,
                           message="tell me a joke"), None)
    assert record["recall"] is None and not any(d["kind"] == "refusal" for d in record["defects"])
    invented = score(outcome("llm", "Call us at 555-0100 and we will change it.", plan="llm"), REFERENCE)
    assert any(d["kind"] == "unsupported" for d in invented["defects"]) and invented["recall"] == 0.0


def test_an_answer_settled_before_the_kb_was_asked_has_no_right_answer_to_score():
    record = score(outcome("tool", "", plan="", top=None), REFERENCE)
    assert record["right"] is None and record["defects"] == []
    assert set_report([record])["right_answer"] == {"rate": None, "count": 0, "of": 0}


def test_llm_answers_the_chain_replaced_and_out_of_scope_drafts_are_counted():
    cut = [{"kind": "truncated", "action": "draft"}, {"kind": "cut_off", "action": "draft"}]
    replaced = score(outcome("draft_with_caveat", "I could not confirm ...", plan="llm", in_scope=False,
                             findings=cut), None)
    kept = score(outcome("llm", "A colleague can help you with that.", plan="llm", in_scope=False), None)
    report = set_report([replaced, kept, score(outcome("draft", DRAFT), REFERENCE)])
    assert report["llm_answers_replaced"] == {"rate": 0.5, "count": 1, "of": 2}
    assert report["llm_answers_replaced_by_finding"] == {"truncated": 1, "cut_off": 1}
    assert report["out_of_scope_served_a_draft"] == {"rate": 0.5, "count": 1, "of": 2}


def test_a_rejected_rewrite_is_counted_by_the_kind_of_its_reason():
    findings = [{"kind": "repeated"}, {"kind": "rewrite_rejected", "detail": "dropped: path 'Account > Orders'"}]
    assert rejection(findings) == "dropped: path 'Account > Orders'" and rejection([{"kind": "x"}]) is None
    assert reason_kind("adds nothing but words") == "adds nothing but words" and reason_kind("echo: <<<") == "echo"


def records() -> list[dict]:
    rejected = [{"kind": "rewrite_rejected", "detail": "echo: Customer message"}]
    return [score(outcome("draft", DRAFT, first=2.0), REFERENCE),                             # right, kept small
            score(outcome("rewrite", GOOD, plan="rewrite", first=900.0), REFERENCE),          # right, rewritten
            score(outcome("draft", DRAFT, plan="rewrite", findings=rejected, first=1100.0), REFERENCE),
            score(outcome("draft", DRAFT, top="track_order", first=3.0), REFERENCE),          # wrong draft
            score(outcome("llm", "Call 555-0100.", plan="llm", in_scope=False, first=700.0), None)]


def test_a_set_report_counts_rewrites_rejections_and_what_was_served():
    report = set_report(records())
    assert report["n"] == 5 and report["right_answer"] == {"rate": 0.75, "count": 3, "of": 4}
    assert report["right_drafts_rewritten"] == {"rate": 0.6667, "count": 2, "of": 3}
    assert report["rewrite_rejected"] == {"rate": 0.5, "count": 1, "of": 2}
    assert report["rewrite_rejected_by_reason"] == {"echo": 1}
    assert report["worse_rewrites_served"] == 0 and report["unsupported_claims_served"] == 1
    assert report["defects"] == {"rate": 0.5, "count": 1, "of": 2} and report["key_fact_recall"] == 1.0
    assert report["llm_first_text_p50_ms"] == 700.0  # LLM answers only: a rewrite shows its draft first
    assert set(report["by_served"]) == {"draft", "rewrite", "llm"} and report["by_served"]["draft"]["n"] == 3
    assert set(report["by_plan"]) == {"small", "rewrite", "llm"}


def test_the_summary_meets_a_target_only_when_every_set_that_measures_it_does():
    good, bad = set_report(records()[:2]), set_report(records())
    result = summary({"demo": good, "zh": bad}, set_report(records() * 2))
    assert result["unsupported_claims_served"]["met"] is False
    assert result["unsupported_claims_served"]["per_set"] == {"demo": 0, "zh": 1}
    assert result["key_fact_recall"]["met"] is True and result["key_fact_recall"]["target"] == "≥ 0.9"
    assert result["defect_rate"]["per_set"] == {"demo": 0.0, "zh": 0.5} and result["defect_rate"]["met"] is False
    assert summary({"demo": good}, good)["defect_rate"]["met"] is True
    empty = summary({"demo": set_report([score(outcome("draft", DRAFT), REFERENCE)])}, set_report([]))
    assert empty["defect_rate"]["met"] is None  # no LLM text served: nothing to judge


def test_the_readme_table_shows_each_set_next_to_its_target():
    sets = {"demo": {"label": "demo shop", "kb": "demo KB", **set_report(records())}}
    report = {"date": "2026-12-05", "model": "smollm2", "max_tokens": 96, "seconds": 120.0, "limit": None,
              "sets": sets, "all": set_report(records())}
    report["summary"] = summary(sets, report["all"])
    table = markdown(report)
    assert "measured 2026-12-05" in table and "**smollm2**" in table
    assert "| measure | demo shop | all | target | met |" in table
    assert "| unsupported claims served | 1 | 1 | 0 | **no** |" in table
    assert "| right drafts rewritten | 66.7 % (2/3) | 66.7 % (2/3) | ≤ 2 % | **no** |" in table
    assert "| demo shop | rewrite | 1 |" in table and "echo 1" in table
    assert "Out-of-scope messages answered with a KB draft: demo shop 0.0 % (0/1)." in table


def test_a_quick_look_spreads_over_the_file_and_keeps_its_out_of_scope_share():
    messages = [Message(f"q{i}", f"m{i}", f"a{i // 10}", True) for i in range(80)]
    messages += [Message(f"o{i}", f"o{i}", "", False) for i in range(20)]
    picked = spread(messages, 10)
    assert len(picked) == 10 and sum(not m.in_scope for m in picked) == 2
    assert len({m.expected for m in picked if m.in_scope}) == 8  # one per answer, not the first answer eight times
    assert spread(messages, None) == messages and spread(messages[:5], 10) == messages[:5]
