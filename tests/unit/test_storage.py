import pytest
from sqlalchemy import text

from storage import settings_store
from storage.db import session_scope
from storage.tables import Feedback, RequestLog


def test_sqlite_runs_in_wal_mode(db):
    with db.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_request_row_round_trip(db):
    row = RequestLog(text="where is my order", route="small", scores={"p_llm": 0.1}, reasons=["tau=0.5"],
                     latency_ms={"embed": 4.2}, kb_version="abc")
    with session_scope() as session:
        session.add(row)
        session.add(Feedback(request_id=row.id, rating=1))
        session.commit()
    with session_scope() as session:
        stored = session.get(RequestLog, row.id)
    assert stored.scores == {"p_llm": 0.1} and stored.latency_ms == {"embed": 4.2}


def test_settings_are_versioned_and_roll_back(db):
    first = settings_store.save({"route_threshold": 0.3}, "alice", "try lower tau")
    second = settings_store.save({"route_threshold": 0.8}, "bob", "too many LLM calls")
    assert second.version == first.version + 1
    assert settings_store.current_thresholds().route_threshold == 0.8
    rolled = settings_store.rollback(first.version, "carol")
    assert rolled.route_threshold == 0.3 and rolled.version == second.version + 1
    latest = settings_store.history(1)[0]
    assert latest.author == "carol" and "rollback" in latest.reason


def test_invalid_thresholds_are_refused(db):
    with pytest.raises(ValueError):
        settings_store.save({"route_threshold": 1.5}, "eve", "")
    with pytest.raises(ValueError):
        settings_store.save({"overload_enter": 0.4, "overload_exit": 0.6}, "eve", "no hysteresis")
