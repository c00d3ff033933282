"""Recurring LLM-bound questions (ops/recurring.py): request-log rows in a real SQLite database, embedded by the real
encoder, grouped by meaning; and the `tandem ops recurring` command over the same kind of rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ops.recurring import SIMILARITY, llm_bound, personal_kinds, recurring_questions
from storage.tables import RequestLog
from tests.conftest import fresh_db

pytestmark = pytest.mark.slow

LAPTOP = ["can you recommend a good laptop for a student?", "which laptop would you suggest for a college student?",
          "what is a good laptop for a student on a budget?"]
JOKE = "tell me a joke about cats"
COMPLAINT = ["my order [order] never arrived, write a complaint letter for me",
             "please write a complaint letter about my order [order] that never arrived"]
EMAIL_COMPLAINT = ["help me draft a complaint letter, my parcel never arrived, contact me at jane.doe@example.com",
                   "can you write a complaint letter for my missing parcel"]


def log(db, rows: list[dict]) -> None:
    """RequestLog rows as the service writes them, a minute apart (oldest first)."""
    start = datetime.now(UTC) - timedelta(minutes=len(rows) + 1)
    with db.session() as session:
        for i, row in enumerate(rows):
            session.add(RequestLog(created_at=start + timedelta(minutes=i), **row))
        session.commit()


def llm(text: str, session: str, **extra) -> dict:
    return {"text": text, "session_id": session, "route": "llm", "served": "llm", **extra}


@pytest.fixture()
def embed(encoder):
    return lambda texts: list(encoder.encode_queries(texts))


def test_paraphrases_group_together_and_an_unrelated_question_stays_apart(tmp_path, embed):
    db = fresh_db(tmp_path)
    log(db, [llm(LAPTOP[0], "s1"), llm(JOKE, "s2"), llm(LAPTOP[1], "s3"), llm(LAPTOP[2], "s3")])
    groups = recurring_questions(db, embed, min_count=1)
    assert [g.count for g in groups] == [3, 1]
    laptop, joke = groups
    assert laptop.representative in LAPTOP and set(laptop.examples) | {laptop.representative} == set(LAPTOP)
    assert laptop.sessions == 2 and not laptop.personal
    assert joke.representative == JOKE
    assert recurring_questions(db, embed) == [laptop]  # min_count=2 by default: only what recurs


def test_small_tier_rows_are_ignored_and_rewrites_degraded_and_fallback_rows_count(tmp_path, embed):
    db = fresh_db(tmp_path)
    log(db, [{"text": LAPTOP[0], "route": "small", "served": "draft"},
             {"text": LAPTOP[1], "route": "cache", "served": "cache"},
             {"text": LAPTOP[2], "route": "llm", "served": "rewrite"},
             {"text": LAPTOP[0], "route": "small", "served": "draft", "degraded": True},
             {"text": LAPTOP[1], "route": "small", "served": "draft", "fallback": True},
             llm(LAPTOP[2], "s9")])
    assert [q.kind for q in llm_bound(db)] == ["rewrite", "degraded", "fallback", "llm"]
    (group,) = recurring_questions(db, embed)
    assert group.count == 4 and group.kinds == {"rewrite": 1, "degraded": 1, "fallback": 1, "llm": 1}


def test_a_group_with_a_masked_order_number_or_an_email_is_flagged_personal(tmp_path, embed):
    db = fresh_db(tmp_path)
    log(db, [llm(COMPLAINT[0], "a"), llm(COMPLAINT[1], "b"), llm(LAPTOP[0], "c"), llm(LAPTOP[1], "d"),
             llm(EMAIL_COMPLAINT[0], "e"), llm(EMAIL_COMPLAINT[1], "f")])
    by_text = {text: g for g in recurring_questions(db, embed, threshold=0.75) for text in (g.representative, *g.examples)}
    assert by_text[COMPLAINT[0]].personal and by_text[COMPLAINT[0]].personal_kinds == ("order",)
    assert by_text[EMAIL_COMPLAINT[1]].personal and by_text[EMAIL_COMPLAINT[1]].personal_kinds == ("email",)
    assert not by_text[LAPTOP[0]].personal


def test_personal_kinds_reads_masked_placeholders_raw_data_and_names():
    assert personal_kinds("where is [order]? mail me at [email]") == ["email", "order"]
    assert personal_kinds("my order NW-104233, call +44 20 7946 0958") == ["order", "phone"]
    assert personal_kinds("Hi, my name is Priya and I need a gift idea") == ["name"]
    assert personal_kinds("我叫王芳，想买礼物") == ["name"]
    assert personal_kinds("what gift would you suggest for a 10 year old?") == []


def test_rows_outside_the_window_are_left_out(tmp_path, embed):
    db = fresh_db(tmp_path)
    log(db, [llm(LAPTOP[0], "s1"), llm(LAPTOP[1], "s2")])
    old = datetime.now(UTC) - timedelta(days=3)
    with db.session() as session:
        session.add(RequestLog(created_at=old, text=LAPTOP[2], route="llm", session_id="s0"))
        session.commit()
    (group,) = recurring_questions(db, embed, since=datetime.now(UTC) - timedelta(days=1))
    assert group.count == 2 and LAPTOP[2] not in (group.representative, *group.examples)


def test_each_vector_space_is_grouped_apart_with_its_own_threshold(tmp_path, embed):
    db = fresh_db(tmp_path)
    log(db, [llm(LAPTOP[0], "s1"), llm(LAPTOP[1], "s2")])
    spaces = recurring_questions(db, embed, space_of=lambda text: "zh" if "which" in text else "", min_count=1)
    assert sorted(g.space for g in spaces) == ["", "zh"]
    assert SIMILARITY["zh"] > SIMILARITY[""]


def test_the_cli_prints_the_largest_group_first_with_its_personal_flag(cli_db):
    from typer.testing import CliRunner

    from tandem.cli import cli

    runner = CliRunner()
    empty = runner.invoke(cli, ["ops", "recurring", "--days", "1"])
    assert empty.exit_code == 0 and empty.output.startswith("no LLM-bound question recurs"), empty.output
    log(cli_db, [llm(t, f"s{i}") for i, t in enumerate(LAPTOP)] + [llm(t, f"c{i}") for i, t in enumerate(COMPLAINT)])
    shown = runner.invoke(cli, ["ops", "recurring", "--days", "1", "--top", "1"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].split() == ["count", "sessions", "last", "seen", "personal", "question"]
    assert lines[1].split()[:2] == ["3", "3"] and lines[1].split()[4] == "no" and lines[1].endswith(tuple(LAPTOP))
    assert not any("complaint" in line for line in lines)  # --top 1
    both = runner.invoke(cli, ["ops", "recurring", "--days", "1"]).output
    assert "yes (order)" in both and "complaint letter" in both
