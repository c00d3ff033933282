"""`make demo` as a new user meets it: one command starts vLLM, the app and the console, prints the URLs, and
any stop signal (Ctrl-C, a supervisor's SIGTERM, even SIGKILL of the launcher) leaves nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tandem.processes import free_ports, port_in_use
from tests.conftest import VENV_BIN, demo_rows, run_cli

pytestmark = pytest.mark.slow


def processes_of(home: Path) -> list[int]:
    """Every process whose environment carries this demo's TANDEM_HOME (children inherit it)."""
    marker = f"TANDEM_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_demo_starts_app_and_console_then_stops(tmp_path):
    app_port, console_port = free_ports(2)
    result = run_cli("demo", "--no-llm", "--exit-when-ready", timeout=600,
                     env={"TANDEM_HOME": str(tmp_path / "home"), "TANDEM_APP_PORT": str(app_port),
                          "TANDEM_CONSOLE_PORT": str(console_port)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"http://127.0.0.1:{app_port}/" in result.stdout
    assert f"http://127.0.0.1:{app_port}/api/v1/chat" in result.stdout
    assert f"http://127.0.0.1:{app_port}/v1" in result.stdout
    assert f"http://127.0.0.1:{console_port}/" in result.stdout
    both_languages = demo_rows("answers.csv") + demo_rows("answers_zh.csv")
    assert f"knowledge    {both_languages} answers" in result.stdout
    assert result.stdout.rstrip().endswith("stopped.")
    assert not processes_of(tmp_path / "home")


@pytest.mark.parametrize("sig, with_llm", [(signal.SIGTERM, True), (signal.SIGKILL, True), (signal.SIGINT, False)])
def test_every_stop_signal_leaves_no_process_and_no_port_behind(tmp_path, sig, with_llm):
    home = tmp_path / "home"
    app_port, console_port, llm_port = free_ports(3)
    ports = {"TANDEM_APP_PORT": app_port, "TANDEM_CONSOLE_PORT": console_port}
    env = {**os.environ, "TANDEM_HOME": str(home), "TANDEM_LLM_URL": f"http://127.0.0.1:{llm_port}/v1",
           **{k: str(v) for k, v in ports.items()}}
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        demo = subprocess.Popen([str(VENV_BIN / "tandem"), "demo", *([] if with_llm else ["--no-llm"])],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 600
        while "Press Ctrl-C" not in log.read_text() and demo.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "Press Ctrl-C" in log.read_text(), log.read_text()[-3000:]
        if with_llm:
            assert f"127.0.0.1:{llm_port}/v1 (vLLM" in log.read_text(), log.read_text()[-2000:]
        children = processes_of(home)
        assert len(children) >= (4 if with_llm else 3)  # launcher, app, console (+ streamlit), vLLM (+ engine)
        stopped_at = time.monotonic()
        demo.send_signal(sig)
        while processes_of(home) and time.monotonic() - stopped_at < 15:
            time.sleep(0.2)
        left = processes_of(home)
        took = time.monotonic() - stopped_at
        assert not left, f"still running after {took:.0f} s: {left}"
        assert took <= 10.5, f"stopping took {took:.1f} s"
        listening = [p for p in [*ports.values(), llm_port] if port_in_use("127.0.0.1", p)]
        assert not listening
    finally:
        for pid in processes_of(home):
            os.kill(pid, signal.SIGKILL)
