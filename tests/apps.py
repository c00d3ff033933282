"""A real app for tests: `tandem serve` in a subprocess on a free port, waited for until `/healthz` says ready; and
`tandem console` the same way, until Streamlit's health check answers."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tandem.processes import free_port
from tests.conftest import VENV_BIN

UPLOAD_LIMIT_MB = 1  # small, so an oversize upload needs only a small generated file
START_TIMEOUT_S = 300  # MiniLM, OCR and Whisper load before the port opens; a busy 2-core machine is slow
# gradio_client posts each job to the queue with httpx's 5 s default; with 8 jobs at once while vLLM and the app
# share 2 cores, that post alone once took longer (CI: ReadTimeout in send_data). The browser has no such limit,
# and these tests check answers, not latency (that is `make bench`).
GRADIO_CLIENT_HTTPX = {"timeout": httpx.Timeout(120.0)}


class RunningApp:
    def __init__(self, url: str, process: subprocess.Popen, log: Path):
        self.url, self.process, self.log = url, process, log
        self.db: Any = None  # storage.db.Database of the app's data directory, where a test reads its rows

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def app_env(home: Path, llm_url: str = "", **extra: str) -> dict[str, str]:
    """The app's environment: its own TANDEM_HOME, and the live LLM at ``llm_url`` or, without one, an LLM tier at a
    closed port (the fallback path, fast)."""
    llm = {"TANDEM_LLM_URL": llm_url} if llm_url else {
        "TANDEM_LLM_URL": f"http://127.0.0.1:{free_port()}/v1", "TANDEM_LLM_RETRIES": "0", "TANDEM_LLM_TIMEOUT_S": "2"}
    return {**os.environ, "TANDEM_HOME": str(home), "TANDEM_MAX_UPLOAD_MB": str(UPLOAD_LIMIT_MB),
            "TANDEM_API_TOKEN": "", "GRADIO_ANALYTICS_ENABLED": "False",
            "TANDEM_PREPARE_TOKENS_PER_HOUR": "0", **llm, **extra}  # no idle-time LLM calls in test apps


def start_app(log: Path, env: dict[str, str]) -> RunningApp:
    port = free_port()
    with log.open("w") as out:
        process = subprocess.Popen([str(VENV_BIN / "tandem"), "serve", "--host", "127.0.0.1", "--port", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    app = RunningApp(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            pytest.fail(f"tandem serve exited with {process.returncode}:\n{app.tail()}")
        try:
            if httpx.get(f"{app.url}/healthz", timeout=2).json().get("ready"):
                return app
        except (httpx.HTTPError, ValueError):
            pass
        if time.monotonic() > deadline:
            stop_app(app)
            pytest.fail(f"tandem serve not ready after {START_TIMEOUT_S} s:\n{app.tail()}")
        time.sleep(0.5)


@contextmanager
def serving(home: Path, **env: str) -> Iterator[RunningApp]:
    """A `tandem serve` on its own data directory ``home`` (``env`` added to app_env), with ``.db`` its database;
    stopped on exit."""
    from storage.db import open_database

    running = start_app(home / "serve.log", app_env(home, **env))
    running.db = open_database(f"sqlite:///{home / 'tandem.db'}")
    try:
        yield running
    finally:
        stop_app(running)


def stop_app(app: RunningApp) -> None:
    try:
        os.killpg(app.process.pid, signal.SIGTERM)
        app.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(app.process.pid, signal.SIGKILL)
        app.process.wait()
    except ProcessLookupError:
        pass


@contextmanager
def running_console(env: dict[str, str], log: Path | None = None, timeout: float = 120,
                    port: int | None = None) -> Iterator[str]:
    """`tandem console` on ``port`` (else a free one) with ``env``; its URL once `/_stcore/health` answers; stopped
    on exit (its own process group: tandem and the streamlit it started)."""
    import urllib.request

    from tests.conftest import REPO

    port = port or free_port()
    with (log.open("w") if log else open(os.devnull, "w")) as output:
        server = subprocess.Popen([str(VENV_BIN / "tandem"), "console", "--port", str(port), "--host", "127.0.0.1"],
                                  cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok", timeout,
                   "the console's /_stcore/health")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def wait_until(predicate, timeout: float, what: str, interval: float = 0.3):
    """Poll until `predicate()` is truthy (exceptions count as not yet), or fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # the server or browser is still starting
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
