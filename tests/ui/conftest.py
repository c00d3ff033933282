"""One real app per test session: `tandem serve` in a subprocess on a free port, in the session's TANDEM_HOME,
with its LLM tier on the session's real vLLM server (so the deployed app's LLM path is tested, not only its
fallback).

Start-up seeds the demo KB and loads MiniLM, OCR and Whisper once; every UI/API test shares it.
The upload limit is lowered to 1 MB so the oversize case needs only a small generated file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import get_settings
from tandem.processes import free_port  # noqa: F401  (re-exported for the UI tests)
from tests.apps import GRADIO_CLIENT_HTTPX, UPLOAD_LIMIT_MB, RunningApp, app_env, start_app, stop_app  # noqa: F401
from tests.llm_server import live

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="session")
def app_server(tandem_home, tmp_path_factory, llm_server_process) -> RunningApp:
    # Long enough LLM answers to watch them stream and to press Stop midway (4 s or so on 2 CPU cores), and greedy
    # ones: a sampled reply can end in a few words, leaving nothing to watch or stop (the chat sets no temperature).
    # Streamed as written (not held until checked, the default): these tests watch the text grow and press Stop. And
    # written to the end even when a finished sentence already fails a check (SmolLM2 often opens by echoing the
    # fence): Stop must find the engine still writing.
    env = app_env(tandem_home, live(llm_server_process).url, TANDEM_LLM_MAX_TOKENS="128", TANDEM_LLM_TEMPERATURE="0",
                  TANDEM_LLM_HOLD_UNTIL_CHECKED="false", TANDEM_LLM_STOP_WHEN_BROKEN="false")
    app = start_app(tmp_path_factory.mktemp("app") / "serve.log", env)
    yield app
    stop_app(app)


@pytest.fixture(scope="session")
def gradio(app_server):
    from gradio_client import Client

    return Client(app_server.url + "/", verbose=False, httpx_kwargs=GRADIO_CLIENT_HTTPX)


def request_row(request_id: str):
    """The logged row, read from the app's SQLite database (same TANDEM_HOME)."""
    from storage.db import open_database
    from storage.tables import RequestLog

    with open_database(get_settings().db_url).session() as session:
        return session.get(RequestLog, request_id)
