"""`make eval`'s answers section for real: demo-shop messages through the whole chain with the session's vLLM server,
every final answer scored and written out for a person to read."""

from __future__ import annotations

import json

import pytest

from offline.answer_eval import run_answer_eval
from offline.answer_report import LLM_TEXT, TARGETS, markdown

pytestmark = pytest.mark.slow


def test_the_answer_eval_scores_every_final_answer_of_the_demo_shop_set(llm_server, bilingual_kb, tmp_path):
    path = tmp_path / "answers.jsonl"
    lines: list[str] = []
    report = run_answer_eval(["demo"], limit=6, log=lines.append, kbs={"demo": bilingual_kb}, records_path=path)

    assert any(llm_server.url in line for line in lines)  # the server already up, not one of its own
    assert llm_server.alive() and report["model"] == llm_server.model
    demo = report["sets"]["demo"]
    assert demo["n"] == 6 and demo["label"] == "demo shop" and report["all"]["n"] == 6
    assert sum(g["n"] for g in demo["by_served"].values()) == 6 == sum(g["n"] for g in demo["by_plan"].values())
    assert set(report["summary"]) == set(TARGETS)

    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 6 and {r["set"] for r in records} == {"demo"}
    assert any(not r["in_scope"] for r in records)  # the quick look keeps the set's out-of-scope share
    for r in records:
        assert r["query_id"].startswith("demo-") and r["message"] and r["served"], r
        assert r["answer"].strip() or r["served"] == "tool", r
        assert r["total_ms"] > 0 and (r["first_text_ms"] is None or r["first_text_ms"] <= r["total_ms"]), r
        assert isinstance(r["right"], bool) if r["in_scope"] else r["right"] is None, r
        assert r["taken_back"] is False, r  # held until checked (the default, as the product): nothing taken back
        if r["served"] in LLM_TEXT:  # LLM text the customer read: its defects, and its key facts when answerable
            assert isinstance(r["defects"], list) and all(d["kind"] for d in r["defects"]), r
            assert r["recall"] is None or 0.0 <= r["recall"] <= 1.0, r
            assert (r["worse_than_draft"] is not None) == (r["served"] == "rewrite"), r
        else:
            assert r["defects"] == [] and r["recall"] is None, r
    assert demo["right_answer"]["of"] == sum(r["in_scope"] for r in records)
    assert demo["right_answer"]["count"] == sum(bool(r["right"]) for r in records)
    assert "| measure | demo shop | all | target | met |" in markdown(report)
