"""One real app per test session: `tandem serve` in a subprocess on a free port, in the session's TANDEM_HOME.

Start-up seeds the demo KB and loads MiniLM, OCR and Whisper once; every UI/API test shares it.
The upload limit is lowered to 1 MB so the oversize case needs only a small generated file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chains.llm.server import free_port  # noqa: F401  (re-exported for the UI tests)
from tests.apps import UPLOAD_LIMIT_MB, RunningApp, app_env, start_app, stop_app  # noqa: F401

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="session")
def app_server(tandem_home, tmp_path_factory) -> RunningApp:
    app = start_app(tmp_path_factory.mktemp("app") / "serve.log", app_env(tandem_home))
    yield app
    stop_app(app)


@pytest.fixture(scope="session")
def gradio(app_server):
    from gradio_client import Client

    return Client(app_server.url + "/", verbose=False)


def request_row(request_id: str):
    """The logged row, read from the app's SQLite database (same TANDEM_HOME)."""
    from storage.db import session_scope
    from storage.tables import RequestLog

    with session_scope() as session:
        return session.get(RequestLog, request_id)
