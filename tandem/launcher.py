"""`tandem demo` (what `make demo` runs): the LLM server, the chat app and the console, started together,
checked healthy, and stopped together on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import typer

from tandem.errors import TandemError


def _wait_http(url: str, timeout: float, process: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    handle = log.open("ab")
    return subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_demo(with_llm: bool = True, exit_when_ready: bool = False) -> int:
    from tandem.bootstrap import bootstrap
    from tandem.settings import get_settings

    settings = get_settings()
    for line in bootstrap(seed=True):
        typer.echo(line)
    tandem = str(Path(sys.executable).parent / "tandem")
    logs = settings.home / "logs"
    started: list[subprocess.Popen] = []
    llm_server = None
    try:
        llm_state = "not started (--no-llm): LLM-bound messages fall back to the small tier"
        if with_llm:
            if _wait_http(settings.llm_url.rstrip("/") + "/models", timeout=1):
                llm_state = f"already running at {settings.llm_url}"
            else:
                from chains.llm.server import LLMServer

                typer.echo(f"starting the LLM server (transformers serve, CPU) at {settings.llm_url} ...")
                try:
                    llm_server = LLMServer().start(wait=True, timeout=180)
                    llm_state = f"{settings.llm_url} (model {llm_server.model})"
                except TandemError as exc:
                    llm_state = f"NOT running ({exc}); LLM-bound messages fall back to the small tier"
        app_url = f"http://{settings.host}:{settings.app_port}"
        console_url = f"http://{settings.host}:{settings.console_port}"
        typer.echo("starting the chat app and the console (models load first, ~20 s) ...")
        app = _spawn([tandem, "serve", "--no-seed"], logs / "app.log")
        console = _spawn([tandem, "console"], logs / "console.log")
        started += [app, console]
        if not _wait_http(app_url + "/healthz", 240, app):
            raise TandemError(f"the chat app did not start; see {logs / 'app.log'}")
        if not _wait_http(console_url + "/_stcore/health", 120, console):
            raise TandemError(f"the console did not start; see {logs / 'console.log'}")
        typer.echo("\nTandem is running:")
        typer.echo(f"  chat UI      {app_url}/")
        typer.echo(f"  HTTP API     {app_url}/api/v1/chat   (docs: {app_url}/docs)")
        typer.echo(f"  console      {console_url}/   (password: TANDEM_CONSOLE_PASSWORD, default 'tandem')")
        typer.echo(f"  LLM server   {llm_state}")
        typer.echo(f"  logs         {logs}\nPress Ctrl-C to stop everything.")
        if exit_when_ready:
            return 0
        while all(p.poll() is None for p in started):
            time.sleep(1)
        typer.echo("a component stopped; shutting down the rest", err=True)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for process in started:
            _stop(process)
        if llm_server is not None:
            llm_server.stop()
        typer.echo("stopped.")


def register(cli: typer.Typer) -> None:
    @cli.command("demo")
    def demo(llm: bool = typer.Option(True, help="Start the local LLM server (CPU) too."),
             exit_when_ready: bool = typer.Option(False, help="Stop again once everything answers (smoke test).")
             ) -> None:
        """Start the LLM server, the chat app (:7860) and the console (:8501); Ctrl-C stops all."""
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        raise typer.Exit(run_demo(with_llm=llm, exit_when_ready=exit_when_ready))
