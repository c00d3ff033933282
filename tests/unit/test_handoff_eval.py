"""The handoff_triggers section of `make eval` (offline/handoff_eval.py): its arithmetic on a known case, and that it
decides with the settings' switches, as the service does."""

from __future__ import annotations

from chains.conversation import Triggers
from offline.handoff_eval import decide, scores
from tests.conftest import REPO

RULES = REPO / "chains" / "rules.yaml"


def test_scores_count_any_trigger_overall_and_the_exact_one_per_trigger():
    expected = ["legal", "anger", "anger", "none", "none", "complaint"]
    got = ["legal", "legal", "none", "anger", "none", "complaint"]
    out = scores(expected, got)
    # overall: 4 need a person, 3 start some handoff (one with the wrong trigger), 1 of 2 others is handed over
    assert out["overall"] == {"precision": 0.75, "recall": 0.75, "tp": 3, "fp": 1, "fn": 1, "n_person": 4,
                              "n_no_person": 2}
    assert out["per_trigger"]["legal"] == {"precision": 0.5, "recall": 1.0, "n": 1, "predicted": 2}
    assert out["per_trigger"]["anger"] == {"precision": 0.0, "recall": 0.0, "n": 2, "predicted": 1}


def test_decide_follows_the_switches_and_judges_a_repeat_after_its_previous_message():
    rows = [{"text": "I'll see you in court", "previous": ""},
            {"text": "where can I find my invoices", "previous": "Where can I find my invoices?"}]
    assert decide(rows, RULES, Triggers(repeat=True)) == ["legal", "repeat"]
    assert decide(rows, RULES, Triggers(legal=False)) == ["none", "none"]
