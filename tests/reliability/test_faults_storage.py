"""Database faults: locked by another connection, read-only, disk full.

Expected (SECURITY.md, fault model): the customer is answered anyway; the row waits in the service's
log backlog and `status()` (so /healthz and the console) shows log_backlog, log_failures and
last_log_error; once the fault clears, the next message flushes the backlog and rows logged == sent.
The database sits on a small tmpfs so read-only and disk-full are real (needs root, as CI has).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from chains.schema import ChatRequest
from core.policy import Thresholds
from tests.reliability.conftest import make_service, session_rows

pytestmark = pytest.mark.slow

QUESTIONS = ("How do I track my order?", "Can I change my order?", "how long does delivery take",
             "I want to return a mug", "where is my refund")


def _mount(folder: Path, *options: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(folder)], check=True,
                   capture_output=True)


@pytest.fixture
def tmpfs_db(tmp_path):
    """A fresh database on its own 8 MB tmpfs (the schema alone filled 1 MB once the catalog and conversation tables
    came; real read-only and disk-full faults need root, as CI has)."""
    from storage import policy_store
    from storage.db import Database

    folder = tmp_path / "dbfs"
    folder.mkdir()
    try:
        _mount(folder, "size=8m", "mode=0777")
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.fail(f"cannot mount a tmpfs here; these faults need root, as CI has: {getattr(exc, 'stderr', exc)!r}")
    db = Database(f"sqlite:///{folder / 'tandem.db'}").init()
    policy_store.ensure_seeded(db, Thresholds.shipped())
    db.folder = folder
    try:
        yield db
    finally:
        db.engine.dispose()  # drop our pooled handles before unmounting
        for _ in range(2):  # the read-only test stacks a bind mount on the tmpfs
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _ask(service, question: str):
    response = service.answer(ChatRequest(message=question, channel="api"))
    assert response.answer.strip() and response.route != "guard", (response.route, response.answer)
    return response


def _fault_then_recover(service, start_fault, clear_fault, expect_error: str, during: int = 2):
    db = service.db
    before = session_rows(db)
    start_fault()
    for question in QUESTIONS[:during]:
        _ask(service, question)
    status = service.status()
    assert status["log_backlog"] == during and status["log_failures"] >= during, status
    assert expect_error in status["last_log_error"].lower(), status["last_log_error"]
    clear_fault()
    _ask(service, QUESTIONS[-1])
    assert service.status()["log_backlog"] == 0, service.status()
    assert session_rows(db) - before == during + 1, ("rows logged != requests sent", _texts(db))


def test_database_locked_by_another_connection(settings, tmpfs_db, small_kb):
    service = make_service(settings, tmpfs_db, small_kb)
    holder = sqlite3.connect(tmpfs_db.folder / "tandem.db", isolation_level=None, timeout=1)
    _fault_then_recover(service, lambda: holder.execute("BEGIN EXCLUSIVE"),
                        lambda: holder.execute("ROLLBACK"), "locked")
    holder.close()


def test_database_read_only(settings, tmpfs_db, small_kb):
    service = make_service(settings, tmpfs_db, small_kb)
    folder = tmpfs_db.folder
    _ask(service, QUESTIONS[0])

    def read_only():
        # Linux refuses to remount a file system read-only while files on it are open for writing, so
        # a read-only bind mount goes on top and the engine reconnects through it (as after a restart).
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True)
        tmpfs_db.engine.dispose()

    def writable():
        subprocess.run(["mount", "-o", "remount,bind,rw", str(folder)], check=True, capture_output=True)
        tmpfs_db.engine.dispose()

    _fault_then_recover(service, read_only, writable, "")
    assert any(word in service.status()["last_log_error"].lower() for word in ("readonly", "read-only", "unable to open")), \
        service.status()["last_log_error"]


def test_disk_full(settings, tmpfs_db, small_kb):
    service = make_service(settings, tmpfs_db, small_kb)
    _ask(service, QUESTIONS[0])
    filler = tmpfs_db.folder / "filler"

    def fill():
        # An empty WAL must grow to take the next write; then fill every free byte.
        with sqlite3.connect(tmpfs_db.folder / "tandem.db") as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True)
        assert os.statvfs(tmpfs_db.folder).f_bavail == 0

    _fault_then_recover(service, fill, filler.unlink, "full")


def _texts(db) -> list[str]:
    from sqlmodel import select

    from storage.tables import RequestLog

    with db.session() as session:
        return [row.text for row in session.exec(select(RequestLog))]
