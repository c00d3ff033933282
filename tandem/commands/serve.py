"""`tandem serve`: the customer chat UI and the HTTP APIs on one port."""

from __future__ import annotations

import typer


def register(cli: typer.Typer) -> None:
    @cli.command("serve")
    def serve(host: str = typer.Option(None, help="Bind address (default TANDEM_HOST, 127.0.0.1)."),
              port: int = typer.Option(None, help="Port (default TANDEM_APP_PORT, 7860)."),
              seed: bool = typer.Option(True, help="Seed demo orders and the demo knowledge base when empty.")
              ) -> None:
        """Start the chat UI at /, Tandem's API at /api/v1 and the OpenAI-compatible API at /v1."""
        from app.server import has_api_key
        from app.server import serve as run
        from chains.bootstrap import bootstrap
        from chains.runtime import open_kb
        from core.encoders import load_encoder
        from core.errors import TandemError
        from core.exposure import app_exposure_problem
        from core.settings import get_settings

        settings = get_settings()
        if problem := app_exposure_problem(host or settings.host, has_api_key(settings)):  # before loading models
            raise TandemError(problem)
        kb = open_kb(settings, load_encoder(settings.encoder)) if seed else None
        for line in bootstrap(settings, kb, seed=seed):
            typer.echo(line)
        typer.echo(f"Northwind Goods support: http://{host or settings.host}:{port or settings.app_port}/ "
                   "(loading models first)")
        run(settings, host=host, port=port)
