"""`tandem console`: the Streamlit operator console, as a child that stops when this command stops."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

import console as console_package

APP = Path(console_package.__file__).resolve().parent / "app.py"


def streamlit_command(port: int, host: str) -> list[str]:
    # The venv's own streamlit, next to this interpreter, not whatever is first on PATH.
    executable = Path(sys.executable).parent / "streamlit"
    launcher = [str(executable)] if executable.exists() else [sys.executable, "-m", "streamlit"]
    return [*launcher, "run", str(APP), "--server.port", str(port), "--server.address", host,
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "viewer"]  # no "Deploy" button or developer menu for operators


def register(cli: typer.Typer) -> None:
    @cli.command("console")
    def console(port: int = typer.Option(None, help="Port (default TANDEM_CONSOLE_PORT, 8501)."),
                host: str = typer.Option(None, help="Bind address (default TANDEM_HOST).")) -> None:
        """Start the operator console (Streamlit): stats, request log, tuning, what-if replay."""
        from chains.bootstrap import prepare_storage
        from console.accounts import has_accounts
        from console.auth import exposure_problem
        from core.settings import get_settings
        from tandem.processes import Child, exit_on_signals, stop_all

        settings = get_settings()
        db = prepare_storage(settings)
        port = port or settings.console_port
        host = host or settings.host
        # No default password beyond loopback (`make console`, `tandem demo` and the cluster all start it here).
        if problem := exposure_problem(db, host):
            typer.echo(f"tandem: error: {problem}", err=True)
            raise typer.Exit(2)
        sign_in = ("operator accounts: `tandem operators list`" if has_accounts(db)
                   else "name 'operator', password TANDEM_CONSOLE_PASSWORD")
        typer.echo(f"console: http://{host}:{port}  (sign in: {sign_in})")
        exit_on_signals()
        child = Child("streamlit", streamlit_command(port, host), settings.home / "logs" / f"console-{port}.log")
        try:
            child.start()
            typer.echo(f"log: {child.log}")
            assert child.process is not None
            code = child.process.wait()
        except KeyboardInterrupt:
            code = 0
        finally:
            stop_all([child])
        raise typer.Exit(code)
