"""Retention (storage/retention.py) on a real SQLite database: message text older than N days is purged, the rows
and their numbers stay; newer text is kept. Run by the ops job and by `tandem ops purge`."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from storage.retention import PURGED_ERROR, purge
from storage.tables import ChatMessage, Feedback, Handoff, RequestLog, utcnow
from tests.conftest import fresh_db

DAYS = 30
TRACE = [{"stage": "check", "decision": "removed [phone]", "detail": {"seen": ["[email]"]}, "ms": 1.5}]
FINDINGS = [{"kind": "phone", "value": "[phone]", "action": "removed"}]


def _conversation(db, name: str, age: timedelta) -> None:
    """One logged turn, ``age`` old: a request row, its two messages, a feedback comment and a handoff note."""
    at = utcnow() - age
    with db.session() as session:
        session.add(RequestLog(id=name, created_at=at, session_id=name, text=f"{name} asks", answer=f"{name} answer",
                               route="llm", rejected_text=f"{name} rejected", trace=TRACE, findings=FINDINGS,
                               error="ValueError: boom", scores={"p_llm": 0.7}, reasons=["llm: p_llm 0.70"],
                               latency_ms={"total": 12.0}, total_ms=12.0, prompt_tokens=40, completion_tokens=9))
        session.add(ChatMessage(session_id=name, role="user", content=f"{name} asks", request_id=name, created_at=at))
        session.add(ChatMessage(session_id=name, role="assistant", content=f"{name} answer", request_id=name,
                                created_at=at))
        session.add(Feedback(request_id=name, rating=-1, comment=f"{name} comment", created_at=at))
        session.add(Handoff(session_id=name, request_id=name, note=f"{name} note", created_at=at))
        session.commit()


def _stored(db, name: str) -> dict:
    with db.session() as session:
        return {"row": session.get(RequestLog, name),
                "messages": [m.content for m in session.exec(select(ChatMessage).where(ChatMessage.session_id == name))],
                "feedback": session.exec(select(Feedback).where(Feedback.request_id == name)).one(),
                "handoff": session.exec(select(Handoff).where(Handoff.request_id == name)).one()}


@pytest.fixture
def db(tmp_path):
    database = fresh_db(tmp_path, "retention")
    _conversation(database, "old", timedelta(days=DAYS + 1))
    _conversation(database, "new", timedelta(days=DAYS - 1))
    return database


def test_text_older_than_the_limit_is_purged_and_its_numbers_kept(db):
    report = purge(db, DAYS)
    assert (report.requests, report.messages, report.feedback, report.handoffs) == (1, 2, 1, 1)
    old = _stored(db, "old")
    row = old["row"]
    assert (row.text, row.answer, row.rejected_text, row.error) == ("", "", "", PURGED_ERROR)
    assert row.trace == [{"stage": "check", "ms": 1.5}]
    assert row.findings == [{"kind": "phone", "action": "removed"}]
    assert (row.route, row.scores, row.reasons, row.total_ms, row.prompt_tokens) == (
        "llm", {"p_llm": 0.7}, ["llm: p_llm 0.70"], 12.0, 40)
    assert old["messages"] == []
    assert old["feedback"].comment == "" and old["feedback"].rating == -1
    assert old["handoff"].note == "" and old["handoff"].status == "open"


def test_text_newer_than_the_limit_is_kept(db):
    purge(db, DAYS)
    new = _stored(db, "new")
    assert (new["row"].text, new["row"].answer, new["row"].rejected_text) == ("new asks", "new answer", "new rejected")
    assert new["row"].trace == TRACE and new["row"].findings == FINDINGS and new["row"].error == "ValueError: boom"
    assert new["messages"] == ["new asks", "new answer"]
    assert new["feedback"].comment == "new comment" and new["handoff"].note == "new note"


def test_a_second_purge_finds_nothing_left_to_purge(db):
    purge(db, DAYS)
    again = purge(db, DAYS)
    assert (again.requests, again.messages, again.feedback, again.handoffs) == (0, 0, 0, 0)


def test_zero_days_purges_nothing(db):
    report = purge(db, 0)
    assert (report.requests, report.messages, report.feedback, report.handoffs) == (0, 0, 0, 0)
    assert _stored(db, "old")["row"].text == "old asks"


def test_the_ops_loop_purges_with_the_retention_setting(db):
    from ops.job import OpsLoop

    loop = OpsLoop(db, every_min=0.002, retention_days=DAYS).start()
    try:
        deadline = time.monotonic() + 60
        while (loop.last is None or loop.last.purged is None) and not loop.last_error and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        loop.stop()
    assert loop.last_error == "" and loop.last.purged.requests == 1
    assert _stored(db, "old")["row"].text == "" and _stored(db, "new")["row"].text == "new asks"


def test_tandem_ops_purge_purges_text_older_than_days(db, tmp_path, monkeypatch):
    from core.settings import reset_settings
    from tandem.cli import cli

    monkeypatch.setenv("TANDEM_DATABASE_URL", f"sqlite:///{tmp_path / 'retention'}.db")
    reset_settings()
    try:
        result = CliRunner().invoke(cli, ["ops", "purge", "--days", str(DAYS)])
    finally:
        monkeypatch.undo()
        reset_settings()
    assert result.exit_code == 0 and "1 requests, 2 conversation messages deleted" in result.output, result.output
    assert _stored(db, "old")["row"].text == "" and _stored(db, "new")["row"].text == "new asks"
