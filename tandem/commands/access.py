"""`tandem keys create|list|revoke` (API keys with scopes) and `tandem identity token` (a signed customer token).

A key is printed once, when it is made; only its SHA-256 is stored. A customer token is what the shop's backend
sends as X-Tandem-Customer for a signed-in customer; this command makes one for trying the API by hand.
"""

from __future__ import annotations

import typer

keys_cli = typer.Typer(help="API keys with scopes (chat, kb, agent, admin), kept hashed in the database.",
                       no_args_is_help=True)
identity_cli = typer.Typer(help="Signed customer identity (X-Tandem-Customer tokens).", no_args_is_help=True)


def register(cli: typer.Typer) -> None:
    cli.add_typer(keys_cli, name="keys")
    cli.add_typer(identity_cli, name="identity")


def _db():
    from chains.bootstrap import prepare_storage
    from core.settings import get_settings

    return prepare_storage(get_settings())


@keys_cli.command("create")
def create(name: str = typer.Argument(..., help="Who or what uses the key (e.g. shop-backend)."),
           scope: list[str] = typer.Option(["chat"], "--scope", help="chat, kb, agent (the operators' inbox) or admin; "
                                           "repeat for several.")
           ) -> None:
    """Make a key and print it once: send it as 'Authorization: Bearer <key>'."""
    from storage.api_keys import create_key

    key = create_key(_db(), name, scope)
    typer.echo(key)
    typer.echo(f"(scopes: {', '.join(scope)}; shown once, only its hash is kept)", err=True)


@keys_cli.command("list")
def list_() -> None:
    """Every key: id, name, scopes, created, revoked (never the key itself)."""
    from storage.api_keys import list_keys

    rows = list_keys(_db())
    if not rows:
        typer.echo("no API keys (create one with `tandem keys create NAME --scope chat`)")
    for row in rows:
        state = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "active"
        typer.echo(f"{row.id}  {row.name or '-':20}  {row.scopes:15}  created {row.created_at:%Y-%m-%d %H:%M}  {state}")


@keys_cli.command("revoke")
def revoke(key_id: str = typer.Argument(..., help="The key's id (from `tandem keys list`).")) -> None:
    """Revoke a key: calls with it get 401 within seconds on every replica."""
    from storage.api_keys import revoke_key

    if not revoke_key(_db(), key_id):
        typer.echo(f"no active key with id {key_id}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {key_id}")


@identity_cli.command("token")
def token(customer: str = typer.Argument(..., help="The customer id the token names."),
          ttl: int = typer.Option(3600, help="Lifetime in seconds.")) -> None:
    """Print a signed customer token (what the shop's backend sends as X-Tandem-Customer)."""
    from core.identity import identity_key, issue_token
    from core.settings import get_settings

    settings = get_settings()
    if ttl > settings.identity_max_ttl_s:
        raise typer.BadParameter(f"at most TANDEM_IDENTITY_MAX_TTL_S ({settings.identity_max_ttl_s} s)")
    typer.echo(issue_token(customer, identity_key(settings.identity_secret, settings.home), ttl))
