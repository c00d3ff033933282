"""`tandem llm-server` (vLLM in the foreground) and `tandem llm-status`."""

from __future__ import annotations

import shlex

import typer


def register(cli: typer.Typer) -> None:
    cli.command("llm-server")(llm_server)
    cli.command("llm-status")(llm_status)


def llm_server(port: int = typer.Option(0, help="Port; 0 means the port of TANDEM_LLM_URL."),
               dry_run: bool = typer.Option(False, help="Print the command and exit.")) -> None:
    """Start vLLM's OpenAI-compatible server at TANDEM_LLM_URL and keep it running until Ctrl-C or SIGTERM."""
    from tandem.llm_server import LLMServer
    from tandem.processes import exit_on_signals

    server = LLMServer(port=port or None)
    typer.echo(shlex.join(server.command))
    if dry_run:
        return
    exit_on_signals()
    try:
        typer.echo("starting vLLM (the CPU build needs about 30 s) ...")
        server.start(wait=True)
        typer.echo(f"LLM server ready at {server.url} (model {server.model}); log: {server.log_path}")
        assert server.child is not None and server.child.process is not None
        server.child.process.wait()
        typer.echo(f"LLM server exited with code {server.child.process.returncode}; log: {server.log_path}", err=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        typer.echo("stopping the LLM server")
    finally:
        server.stop()


def llm_status() -> None:
    """Load, breaker state and tiers of the LLM endpoint, as JSON (no call is sent)."""
    import json

    from chains.llm.client import LLMClient
    from core.settings import get_settings

    typer.echo(json.dumps(LLMClient(get_settings(), poll_metrics=False).status(), indent=2, default=str))
