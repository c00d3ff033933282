"""`tandem cluster` (what `make cluster` runs): Redis, PostgreSQL, Chroma, vLLM, N app replicas behind nginx, and
the console, on 127.0.0.1; Ctrl-C or SIGTERM stops everything."""

from __future__ import annotations

import time

import typer


def register(cli: typer.Typer) -> None:
    @cli.command("cluster")
    def cluster(replicas: int = typer.Option(2, envvar="REPLICAS", min=1, max=16, help="App replicas (7861, ...)."),
                llm: bool = typer.Option(True, help="Start the local vLLM server too."),
                exit_when_ready: bool = typer.Option(False, help="Stop again once everything answers.")) -> None:
        """Several app replicas on Redis, PostgreSQL and a Chroma server behind nginx on :7860."""
        from core.errors import TandemError
        from core.settings import ensure_home, get_settings
        from tandem.cluster import Cluster
        from tandem.processes import exit_on_signals

        exit_on_signals()
        settings = get_settings()
        ensure_home(settings)
        started = time.monotonic()
        parts = Cluster(settings, replicas=replicas, with_llm=llm, log=typer.echo)
        try:
            parts.start()
            typer.echo(f"\nTandem cluster is running ({replicas} replicas, ready in "
                       f"{time.monotonic() - started:.0f} s):")
            for line in parts.urls():
                typer.echo(line)
            typer.echo("Press Ctrl-C to stop everything.")
            if exit_when_ready:
                return
            while all(child.alive() for name, child in parts.children.items() if name != "llm"):
                time.sleep(1)
            typer.echo("a component stopped; shutting down the rest", err=True)
            raise typer.Exit(1)
        except TandemError as exc:
            typer.echo(f"tandem cluster: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            pass
        finally:
            typer.echo("stopping ...")
            parts.stop()
            typer.echo("stopped.")
