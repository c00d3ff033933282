"""Predicted LLM-bound follow-ups (ops/predicted.py) on a real SQLite request log: the group that conversations going
on now are likely to ask next goes before a larger one; with no such conversation, size decides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ops.predicted import active_states, follow_up_index, predicted_first
from ops.recurring import RecurringGroup
from storage.tables import RequestLog, new_id
from tests.conftest import fresh_db

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
TRACKED = {"route": "small", "served": "draft", "sources": [{"answer_id": "track_order", "title": "", "score": 1.0}]}
ASKED = {"route": "llm", "served": "llm", "sources": []}


def _log(db, session_id: str, at: datetime, text: str, **how) -> str:
    row = RequestLog(id=new_id(), session_id=session_id, created_at=at, channel="api", text=text, **how)
    with db.session() as session:
        session.add(row)
        session.commit()
    return row.id


def _group(text: str, request_ids: list[str]) -> RecurringGroup:
    return RecurringGroup(representative=text, count=len(request_ids), sessions=len(request_ids), last_seen=NOW,
                          examples=(), personal=False, personal_kinds=(), kinds={"llm": len(request_ids)}, space="",
                          request_ids=tuple(request_ids))


def _history(db) -> list[RecurringGroup]:
    """Yesterday: 4 conversations asked for compensation right after an order-status answer; 7 asked for a kettle
    recommendation, right after a return-policy answer or as their first message."""
    late, kettle = [], []
    for i in range(4):
        at = NOW - timedelta(hours=20, minutes=i * 10)
        _log(db, f"late-{i}", at, "How do I track my order?", **TRACKED)
        late.append(_log(db, f"late-{i}", at + timedelta(minutes=1), "it is late, I want compensation", **ASKED))
    for i in range(7):
        at = NOW - timedelta(hours=18, minutes=i * 10)
        if i % 2:
            _log(db, f"kettle-{i}", at, "What is your return policy?", route="small", served="draft",
                 sources=[{"answer_id": "return_policy", "title": "", "score": 1.0}])
        kettle.append(_log(db, f"kettle-{i}", at + timedelta(minutes=1), "which kettle do you recommend?", **ASKED))
    return [_group("which kettle do you recommend?", kettle), _group("it is late, I want compensation", late)]


def test_a_group_predicted_by_a_conversation_going_on_now_goes_before_a_larger_one(tmp_path):
    db = fresh_db(tmp_path)
    groups = _history(db)
    index = follow_up_index(db, groups, NOW - timedelta(days=1))
    assert index.before[1]["track_order"] == 4 and index.totals["track_order"] == 4
    assert [g.count for g, _ in predicted_first(groups, index.scores(active_states(db, NOW)))] == [7, 4]
    _log(db, "now", NOW - timedelta(minutes=2), "where is my parcel?", **TRACKED)
    active = active_states(db, NOW)
    assert active == ["track_order"]
    ordered = predicted_first(groups, index.scores(active))
    assert [g.representative for g, _ in ordered] == ["it is late, I want compensation",
                                                       "which kettle do you recommend?"]
    assert ordered[0][1] == 1.0 and ordered[1][1] == 0.0


def test_a_conversation_that_went_quiet_predicts_nothing(tmp_path):
    db = fresh_db(tmp_path)
    groups = _history(db)
    _log(db, "earlier", NOW - timedelta(minutes=40), "where is my parcel?", **TRACKED)
    index = follow_up_index(db, groups, NOW - timedelta(days=1))
    assert active_states(db, NOW) == []
    assert [g.count for g, _ in predicted_first(groups, index.scores(active_states(db, NOW)))] == [7, 4]
