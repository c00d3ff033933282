"""`tandem console`: start the Streamlit operator console."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

APP = Path(__file__).resolve().parent / "app.py"


def streamlit_command(port: int, host: str) -> list[str]:
    # The venv's own streamlit, next to this interpreter, not whatever is first on PATH.
    executable = Path(sys.executable).parent / "streamlit"
    launcher = [str(executable)] if executable.exists() else [sys.executable, "-m", "streamlit"]
    return [*launcher, "run", str(APP), "--server.port", str(port), "--server.address", host,
            "--server.headless", "true", "--browser.gatherUsageStats", "false"]


def register(cli: typer.Typer) -> None:
    @cli.command("console")
    def console(port: int = typer.Option(None, help="Port (default TANDEM_CONSOLE_PORT, 8501)."),
                host: str = typer.Option(None, help="Bind address (default TANDEM_HOST).")) -> None:
        """Start the operator console (Streamlit): stats, request log, tuning, what-if replay."""
        from tandem.bootstrap import bootstrap
        from tandem.settings import get_settings

        settings = get_settings()
        for line in bootstrap(seed=False):
            typer.echo(line)
        port = port or settings.console_port
        host = host or settings.host
        typer.echo(f"console: http://{host}:{port}  (password: TANDEM_CONSOLE_PASSWORD)")
        try:
            code = subprocess.call(streamlit_command(port, host), env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except KeyboardInterrupt:
            code = 0
        raise typer.Exit(code)
