import pytest
from sqlalchemy import text

from storage import policy_store
from storage.tables import Feedback, RequestLog


def test_sqlite_runs_in_wal_mode(db):
    with db.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_request_row_round_trip(db):
    row = RequestLog(text="where is my order", route="small", scores={"p_llm": 0.1}, reasons=["tau=0.5"],
                     latency_ms={"embed": 4.2}, kb_version="abc")
    with db.session() as session:
        session.add(row)
        session.add(Feedback(request_id=row.id, rating=1))
        session.commit()
    with db.session() as session:
        stored = session.get(RequestLog, row.id)
    assert stored.scores == {"p_llm": 0.1} and stored.latency_ms == {"embed": 4.2} and stored.cancelled is False


def test_policy_is_versioned_and_rolls_back(db):
    first = policy_store.save(db, {"route_threshold": 0.3}, "alice", "try lower tau")
    second = policy_store.save(db, {"route_threshold": 0.8}, "bob", "too many LLM calls", evidence={"llm_share": 0.6})
    assert second.version == first.version + 1
    assert policy_store.current(db).route_threshold == 0.8
    assert policy_store.history(db, 1)[0].evidence == {"llm_share": 0.6}
    rolled = policy_store.rollback(db, first.version, "carol")
    assert rolled.route_threshold == 0.3 and rolled.version == second.version + 1
    latest = policy_store.history(db, 1)[0]
    assert latest.author == "carol" and "rollback" in latest.reason


def test_invalid_thresholds_are_refused(db):
    with pytest.raises(ValueError):
        policy_store.save(db, {"route_threshold": 1.5}, "eve", "")
    with pytest.raises(ValueError):
        policy_store.save(db, {"overload_enter": 0.4, "overload_exit": 0.6}, "eve", "no hysteresis")


def test_an_older_database_gains_new_columns(tmp_path):
    """A TANDEM_HOME from an earlier release lacks columns added since; init() adds them, rows keep working."""
    import sqlite3

    from storage.db import Database

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE requests (id VARCHAR PRIMARY KEY, created_at DATETIME, text TEXT)")
        conn.execute("INSERT INTO requests (id, text) VALUES ('old-1', 'hello')")
    db = Database(f"sqlite:///{path}").init()
    with sqlite3.connect(path) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(requests)")}
        cancelled = conn.execute("SELECT cancelled FROM requests WHERE id='old-1'").fetchone()[0]
    assert {"route", "cancelled", "trace", "settings_version"} <= columns and cancelled == 0
    with db.session() as session:
        session.add(RequestLog(id="new-1", text="hi", route="small"))
        session.commit()
