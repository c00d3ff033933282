"""`make demo` as a new user meets it: one command starts the app and the console and prints the URLs."""

from __future__ import annotations

import pytest

from chains.llm.server import free_port
from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def test_demo_starts_app_and_console_then_stops(tmp_path):
    app_port, console_port = free_port(), free_port()
    result = run_cli("demo", "--no-llm", "--exit-when-ready", timeout=600,
                     env={"TANDEM_HOME": str(tmp_path / "home"), "TANDEM_APP_PORT": str(app_port),
                          "TANDEM_CONSOLE_PORT": str(console_port)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"http://127.0.0.1:{app_port}/" in result.stdout
    assert f"http://127.0.0.1:{app_port}/api/v1/chat" in result.stdout
    assert f"http://127.0.0.1:{console_port}/" in result.stdout
    assert "demo knowledge base: ingested 62 answers" in result.stdout
    assert result.stdout.rstrip().endswith("stopped.")
