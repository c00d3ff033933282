"""`tandem llm-server`: run the OpenAI-compatible LLM server in the foreground."""

from __future__ import annotations

import shlex

import typer


def register(cli: typer.Typer) -> None:
    cli.command("llm-server")(llm_server)
    cli.command("llm-status")(llm_status)


def llm_server(
    engine: str = typer.Option("transformers", help="transformers (CPU, SmolLM2) or vllm (GPU host)."),
    port: int = typer.Option(0, help="Port; 0 means the port of TANDEM_LLM_URL."),
    continuous_batching: bool = typer.Option(True, help="transformers only: batch concurrent requests."),
    dry_run: bool = typer.Option(False, help="Print the command and exit."),
) -> None:
    """Start the LLM server at TANDEM_LLM_URL and keep it running until Ctrl-C."""
    import signal

    from chains.llm.server import LLMServer

    server = LLMServer(port=port or None, engine=engine, continuous_batching=continuous_batching)
    typer.echo(shlex.join(server.command))
    if dry_run:
        return
    server.start(wait=True)
    typer.echo(f"LLM server ready at {server.url} (model {server.model}); log: {server.log_path}")
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` from a supervisor stops the child group too
    try:
        server.process.wait()
        typer.echo(f"LLM server exited with code {server.process.returncode}; log: {server.log_path}", err=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        typer.echo("stopping LLM server")
        server.stop()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def llm_status() -> None:
    """Load, breaker state and tiers of the LLM endpoint, as JSON (no call is sent)."""
    import json

    from chains.llm.client import get_llm_client

    typer.echo(json.dumps(get_llm_client().status(), indent=2, default=str))
