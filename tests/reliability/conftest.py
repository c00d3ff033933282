"""Reliability fixtures: one real app (`tandem serve` subprocess) for the whole package, in its own TANDEM_HOME.

Before the app starts, the demo knowledge base and a document with a planted prompt injection are
ingested with the real CLI (`tandem kb ingest`). The LLM tier points at a closed port, so LLM-bound
messages take the fallback path quickly; LLM faults are tested in-process in test_faults_llm.py.
Request rows are counted straight from the app's SQLite file, independent of the app's own code.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.apps import GRADIO_CLIENT_HTTPX, UPLOAD_LIMIT_MB, RunningApp, start_app, stop_app  # noqa: F401
from tests.apps import app_env as shared_app_env
from tests.conftest import DEMO, run_cli, write_csv
from tests.reliability.corpus.generate import INJECTION_DOC


@dataclass
class ReliabilityApp:
    url: str
    home: Path
    running: RunningApp

    @property
    def db_path(self) -> Path:
        return self.home / "tandem.db"

    def count_rows(self, table: str = "requests") -> int:
        with sqlite3.connect(self.db_path, timeout=30) as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]

    def row(self, request_id: str) -> dict | None:
        with sqlite3.connect(self.db_path, timeout=30) as conn:
            conn.row_factory = sqlite3.Row
            found = conn.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        return dict(found) if found else None

    def health(self) -> dict:
        return httpx.get(f"{self.url}/healthz", timeout=30).json()

    def wait_log_flushed(self, timeout: float = 30) -> dict:
        """The app writes rows synchronously; this only waits out a backlog left by an earlier fault."""
        deadline = time.monotonic() + timeout
        while True:
            health = self.health()
            if not health.get("log_backlog") or time.monotonic() > deadline:
                return health
            time.sleep(0.5)

    def alive(self) -> bool:
        return self.running.process.poll() is None


def app_env(home: Path, **extra: str) -> dict[str, str]:
    # The corpus and the soak are floods from one client; the limit itself is tested in test_access.py.
    return shared_app_env(home, TANDEM_RATE_LIMIT_PER_MIN="0", TANDEM_RATE_LIMIT_TOTAL_PER_MIN="0", **extra)


@pytest.fixture(scope="session")
def reliability_app(tmp_path_factory) -> ReliabilityApp:
    home = tmp_path_factory.mktemp("reliability-home")
    env = app_env(home)
    ingest = run_cli("kb", "ingest", "--no-progress", str(DEMO / "answers.csv"), str(DEMO / "questions.csv"),
                     str(INJECTION_DOC), env={"TANDEM_HOME": str(home)})
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    running = start_app(tmp_path_factory.mktemp("reliability-log") / "serve.log", env)
    yield ReliabilityApp(running.url, home, running)
    stop_app(running)


@pytest.fixture(scope="session")
def api(reliability_app):
    with httpx.Client(base_url=reliability_app.url, timeout=120) as client:
        yield client


@pytest.fixture(scope="session")
def gradio(reliability_app):
    from gradio_client import Client

    return Client(reliability_app.url + "/", verbose=False, httpx_kwargs=GRADIO_CLIENT_HTTPX)


# --- in-process service for the fault tests -------------------------------------------------------

@pytest.fixture(scope="session")
def small_kb(tmp_path_factory, encoder):
    """A real Chroma KB in a temp folder with a handful of demo answers (cheap to embed)."""
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from offline.datasets import read_csv

    folder = tmp_path_factory.mktemp("small-kb")
    answers = write_csv(folder / "answers.csv", read_csv(DEMO / "answers.csv")[:6])
    kb = ChromaKnowledgeBase(encoder, path=folder / "chroma")
    kb.ingest([answers], progress=False)
    return kb


def session_rows(db) -> int:
    """Rows in `requests` of a database (counted with plain SQL, not through the service)."""
    from sqlalchemy import func
    from sqlmodel import select

    from storage.tables import RequestLog

    with db.session() as session:
        return session.exec(select(func.count()).select_from(RequestLog)).one()


def make_service(settings, db, kb, llm=None):
    from tests.conftest import make_runtime

    return make_runtime(settings, db, kb, llm=llm).service
