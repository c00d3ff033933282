"""Shared fixtures: a throwaway TANDEM_HOME per test session, real models, real SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("TANDEM_SHARED_DATA", REPO.parent / "shared" / "data"))
VENV_BIN = Path(sys.executable).parent

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"


@pytest.fixture(scope="session", autouse=True)
def tandem_home(tmp_path_factory) -> Path:
    """Every test session gets an empty data directory; converted models are shared from the repo's."""
    from storage.db import reset_engines
    from tandem.settings import reset_settings

    home = tmp_path_factory.mktemp("tandem-home")
    os.environ["TANDEM_HOME"] = str(home)
    os.environ["TANDEM_MODEL_DIR"] = str(REPO / ".tandem" / "models")
    os.environ.pop("TANDEM_DATABASE_URL", None)
    os.environ.setdefault("TANDEM_LLM_MAX_TOKENS", "16")  # SmolLM2 on 2 CPU cores: keep answers short in tests
    reset_settings()
    reset_engines()
    return home


@pytest.fixture(scope="session")
def db(tandem_home):
    from tandem.bootstrap import bootstrap

    list(bootstrap(seed=False))
    from storage.db import get_engine

    return get_engine()


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the installed `tandem` console script as a user would."""
    return subprocess.run([str(VENV_BIN / "tandem"), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


from tests.llm_server import llm_server, llm_server_process  # noqa: E402,F401  (the real CPU LLM server)
