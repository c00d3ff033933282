"""`tandem serve`: the customer chat UI and the HTTP API on one port."""

from __future__ import annotations

import typer


def register(cli: typer.Typer) -> None:
    @cli.command("serve")
    def serve(host: str = typer.Option(None, help="Bind address (default TANDEM_HOST, 127.0.0.1)."),
              port: int = typer.Option(None, help="Port (default TANDEM_APP_PORT, 7860)."),
              seed: bool = typer.Option(True, help="Seed demo orders and the demo knowledge base when empty.")
              ) -> None:
        """Start the chat UI at / and the HTTP API at /api/v1 (models load before the port opens)."""
        from app.server import serve as run
        from tandem.bootstrap import bootstrap
        from tandem.settings import get_settings

        for line in bootstrap(seed=seed):
            typer.echo(line)
        settings = get_settings()
        typer.echo(f"Northwind Goods support: http://{host or settings.host}:{port or settings.app_port}/ "
                   "(loading models first)")
        run(host=host, port=port)
