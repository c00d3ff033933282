"""The storage layer on a real PostgreSQL server (Debian's, started in a temp folder for this test)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time

import pytest

from tandem.processes import free_port

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def postgres_url():
    import tempfile
    from pathlib import Path

    assert BIN and shutil.which("runuser"), "PostgreSQL server binaries are missing: run `make test` (it installs them)"
    bindir = BIN[-1]
    # Not under pytest's tmp dir: that is private to root, and the server runs as user postgres.
    folder = Path(tempfile.mkdtemp(prefix="tandem-pg-"))
    os.chmod(folder, 0o777)
    data = folder / "data"
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*as_postgres, f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "tandem"],
                   check=True, capture_output=True)
    port = free_port()
    server = subprocess.Popen([*as_postgres, f"{bindir}/postgres", "-D", str(data), "-p", str(port),
                               "-k", str(folder), "-h", "127.0.0.1"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = f"postgresql+psycopg2://tandem@127.0.0.1:{port}/postgres"
    try:
        from sqlalchemy import create_engine, text

        deadline = time.monotonic() + 30
        while True:
            try:
                with create_engine(url).connect() as conn:
                    conn.execute(text("SELECT 1"))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(folder, ignore_errors=True)


def test_tables_rows_and_versioned_policy_on_postgres(postgres_url):
    from storage import policy_store
    from storage.db import Database
    from storage.tables import RequestLog

    db = Database(postgres_url).init()
    assert db.engine.dialect.name == "postgresql"
    row = RequestLog(text="hello", route="small", scores={"p_llm": 0.2}, latency_ms={"total": 12.5})
    with db.session() as session:
        session.add(row)
        session.commit()
    with db.session() as session:
        assert session.get(RequestLog, row.id).scores == {"p_llm": 0.2}
    first = policy_store.save(db, {"route_threshold": 0.4}, "pg-test", "on postgres")
    assert policy_store.current(db).route_threshold == 0.4
    assert policy_store.rollback(db, first.version, "pg-test").version == first.version + 1
