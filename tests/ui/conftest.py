"""One real app per test session: `tandem serve` in a subprocess on a free port, in the session's TANDEM_HOME.

Start-up seeds the demo KB and loads MiniLM, OCR and Whisper once; every UI/API test shares it.
The upload limit is lowered to 1 MB so the oversize case needs only a small generated file.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import VENV_BIN

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
UPLOAD_LIMIT_MB = 1
START_TIMEOUT_S = 240


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RunningApp:
    def __init__(self, url: str, process: subprocess.Popen, log: Path):
        self.url, self.process, self.log = url, process, log

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="session")
def app_server(tandem_home, tmp_path_factory) -> RunningApp:
    port = free_port()
    log = tmp_path_factory.mktemp("app") / "serve.log"
    env = {**os.environ, "TANDEM_HOME": str(tandem_home), "TANDEM_MAX_UPLOAD_MB": str(UPLOAD_LIMIT_MB),
           "TANDEM_API_TOKEN": "", "GRADIO_ANALYTICS_ENABLED": "False",
           # no LLM server in these tests: point the LLM tier at a closed port so it falls back fast
           "TANDEM_LLM_URL": f"http://127.0.0.1:{free_port()}/v1", "TANDEM_LLM_RETRIES": "0",
           "TANDEM_LLM_TIMEOUT_S": "2"}
    with log.open("w") as out:
        process = subprocess.Popen([str(VENV_BIN / "tandem"), "serve", "--host", "127.0.0.1", "--port", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    app = RunningApp(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"tandem serve exited with {process.returncode}:\n{app.tail()}")
            try:
                if httpx.get(f"{app.url}/healthz", timeout=2).json().get("ready"):
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"tandem serve not ready after {START_TIMEOUT_S} s:\n{app.tail()}")
            time.sleep(0.5)
        yield app
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


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
