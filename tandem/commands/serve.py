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
        from app.server import refuse_if_exposed
        from app.server import serve as run
        from chains.bootstrap import bootstrap
        from chains.runtime import open_kb
        from core.encoders import load_encoder
        from core.settings import get_settings

        settings = get_settings()
        refuse_if_exposed(settings, host or settings.host)  # before loading models; serve() checks again (cheap)
        kb = open_kb(settings, load_encoder(settings.encoder, settings=settings)) if seed else None
        for line in bootstrap(settings, kb, seed=seed):
            typer.echo(line)
        typer.echo(f"{settings.shop_name} support: http://{host or settings.host}:{port or settings.app_port}/ "
                   "(loading models first)")
        run(settings, host=host, port=port)
