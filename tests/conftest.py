"""Shared fixtures: a throwaway TANDEM_HOME per test session, real models, a real Chroma store, real SQLite, and one
real vLLM server per session. Parts are built with the runtime's own constructors; nothing is patched.

Skips: under CI=true a skipped test fails, unless its node id is on tests/skip_allowlist.txt with a reason.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("TANDEM_SHARED_DATA", REPO.parent / "shared" / "data"))
DEMO = REPO / "knowledge" / "demo"
VENV_BIN = Path(sys.executable).parent
SKIP_ALLOWLIST = Path(__file__).resolve().parent / "skip_allowlist.txt"

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"


# --- no silent skips -------------------------------------------------------------------------------
def allowed_skips() -> dict[str, str]:
    """node id -> reason, from the allow-list (lines: `node id  # reason`)."""
    allowed = {}
    if SKIP_ALLOWLIST.exists():
        for line in SKIP_ALLOWLIST.read_text().splitlines():
            node, _, reason = line.partition("#")
            if node.strip() and reason.strip():
                allowed[node.strip()] = reason.strip()
    return allowed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI", "").lower() == "true" and item.nodeid not in allowed_skips():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true without an entry in {SKIP_ALLOWLIST.name}: {reason}. A skipped "
                           "test proves nothing; install what it needs (make test does) or list it with a reason.")


# --- a data directory and the settings that point at it ---------------------------------------------
@pytest.fixture(scope="session", autouse=True)
def tandem_home(tmp_path_factory) -> Path:
    """Every test session gets an empty data directory; converted models are shared from the repo's."""
    from core.settings import reset_settings

    home = tmp_path_factory.mktemp("tandem-home")
    os.environ["TANDEM_HOME"] = str(home)
    os.environ["TANDEM_MODEL_DIR"] = str(REPO / ".tandem" / "models")
    os.environ.pop("TANDEM_DATABASE_URL", None)
    os.environ.setdefault("TANDEM_LLM_MAX_TOKENS", "16")  # SmolLM2 on 2 CPU cores: keep answers short in tests
    # The product's default stand-in is Qwen2.5-0.5B; the tests run the real engine with SmolLM2, about 4x faster on
    # 2 cores, so the suite stays within its time (README, Tests). What they check does not depend on the model.
    os.environ["TANDEM_LLM_MODEL"] = "smollm2"
    # No idle-time worker in the test session (apps started by the tests inherit this): no test sees an LLM call it
    # did not send. tests/integration/test_prepared.py builds its own workers.
    os.environ["TANDEM_PREPARE_TOKENS_PER_HOUR"] = "0"
    # No predicted failure either (apps inherit this too): the session's tests share databases, and once ten of their
    # LLM answers failed, another test's LLM answer would be replaced by the offer of a person without being asked.
    # tests/handoff/test_fast_offer.py switches it on over a database of its own.
    os.environ["TANDEM_HANDOFF_ON_PREDICTED_FAILURE"] = "false"
    # One passage cache for the session's many data directories (apps, demos, CLIs, replicas): the starter examples
    # and the demo KB are embedded for real once per session, not once per process (about 10 s each on 2 cores).
    os.environ["TANDEM_PASSAGE_CACHE"] = str(tmp_path_factory.getbasetemp() / "passages.sqlite3")
    reset_settings()
    return home


@pytest.fixture(scope="session")
def settings(tandem_home):
    from core.settings import get_settings

    return get_settings()


@pytest.fixture(scope="session")
def db(settings):
    from chains.bootstrap import prepare_storage
    from storage.seed import seed_orders

    database = prepare_storage(settings)
    seed_orders(database)
    return database


@pytest.fixture(scope="session")
def encoder(settings):
    from core.encoders import load_encoder

    return load_encoder(settings.encoder, settings=settings)


@pytest.fixture(scope="session")
def demo_kb(encoder, tmp_path_factory):
    """The demo knowledge base in a real Chroma store of its own."""
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.demo_kb import DEMO_FILES

    kb = ChromaKnowledgeBase(encoder, path=tmp_path_factory.mktemp("demo-kb") / "chroma")
    kb.ingest(DEMO_FILES, progress=False)
    return kb


@pytest.fixture(scope="session")
def bilingual_kb(encoder, tmp_path_factory):
    """The demo knowledge base with a Chinese vector space (e5) beside the English one; tests only read it."""
    from core.encoders import load_encoder
    from core.settings import get_settings
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.demo_kb import DEMO_FILES

    kb = ChromaKnowledgeBase(encoder, path=tmp_path_factory.mktemp("bilingual-kb") / "chroma",
                             language_encoders={"zh": load_encoder("e5", settings=get_settings())})
    kb.ingest(DEMO_FILES, progress=False)
    return kb


def make_runtime(settings, db, kb, *, llm=None, use_llm=False, **parts):
    """A runtime over the given parts (a test's own composition root)."""
    from chains.runtime import build_runtime

    return build_runtime(settings, db=db, kb=kb, llm=llm, use_llm=use_llm, **parts)


def fresh_db(folder: Path, name: str = "tandem"):
    """A database of a test's own (SQLite in ``folder``), tables created and the policy seeded."""
    from chains.bootstrap import prepare_storage
    from core.settings import get_settings
    from storage.db import open_database

    return prepare_storage(get_settings(), open_database(f"sqlite:///{folder / name}.db"))


def demo_rows(name: str) -> int:
    """Rows in one of the demo KB's files (knowledge/demo/<name>), so counts follow the data, not a copy of it."""
    from knowledge.demo_kb import DEMO_DIR

    with (DEMO_DIR / name).open(encoding="utf-8") as f:
        return sum(1 for _ in csv.DictReader(f))


def demo_order_items(order_id: str) -> list[str]:
    """The items of one demo order (knowledge/demo/orders.csv stores them as "item|item")."""
    from storage.seed import DEMO_ORDERS

    with DEMO_ORDERS.open(encoding="utf-8") as f:
        return next(row["items"] for row in csv.DictReader(f) if row["order_id"] == order_id).split("|")


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    """``rows`` (dicts with the same keys, at least one) as a CSV with a header, the way a shop's files look."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the installed `tandem` console script as a user would."""
    return subprocess.run([str(VENV_BIN / "tandem"), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


from tests.llm_server import (  # noqa: E402,F401
    killed_llm_server,
    llm_client,
    llm_server,
    llm_server_process,
    llm_settings,
)


def pytest_collection_modifyitems(session, config, items):
    """The ops scenarios put slowdowns and outages in front of the session's shared vLLM and run many runtimes in
    this process; they go last, so no live-LLM test of another module runs after them (in the last full run the
    three live-LLM UI tests failed only when they followed the ops module).

    After them, the tests that kill that vLLM (marked kills_llm), and last those that only need it dead
    (killed_llm_server): each kill earlier in the run cost a vLLM start for the next live-LLM test (two a run,
    about 45 s each on 2 AVX2 cores, 63 s measured under load here); at the end no test needs it again."""
    def order(item) -> tuple[bool, bool, bool]:
        kills = item.get_closest_marker("kills_llm") is not None or "killed_llm_server" in item.fixturenames
        return kills, item.nodeid.startswith("tests/ops/"), "killed_llm_server" in item.fixturenames

    items.sort(key=order)  # stable: the order within each group stays the collection order
