"""`tandem operators add|list|set-password|disable|enable|remove`: the console's operator accounts.

Passwords are read with hidden input (asked twice) or, for scripts, as one line on stdin (``--password-stdin``);
only their bcrypt hash is stored. The first account turns the shared TANDEM_CONSOLE_PASSWORD off.
"""

from __future__ import annotations

import sys

import typer

operators_cli = typer.Typer(help="Console operator accounts (sign-in name and bcrypt-hashed password).",
                            no_args_is_help=True)

PASSWORD_STDIN = typer.Option(False, "--password-stdin", help="Read the password as one line on stdin (scripts).")


def register(cli: typer.Typer) -> None:
    cli.add_typer(operators_cli, name="operators")


def _db():
    from chains.bootstrap import prepare_storage
    from core.settings import get_settings

    return prepare_storage(get_settings())


def _read_password(from_stdin: bool) -> str:
    from console.accounts import AccountError, password_problem

    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if problem := password_problem(password):
        raise AccountError(problem)
    return password


@operators_cli.command("add")
def add(name: str = typer.Argument(..., help="The name the operator signs in with (the author in the history)."),
        password_stdin: bool = PASSWORD_STDIN) -> None:
    """Add an account (the password is asked twice, hidden)."""
    from console.accounts import AccountError, add_operator, name_problem

    if problem := name_problem(name):  # before asking for a password
        raise AccountError(problem)
    add_operator(_db(), name, _read_password(password_stdin))
    typer.echo(f"operator {name} added; the console now signs in with operator accounts only")


@operators_cli.command("list")
def list_() -> None:
    """The accounts (name, created, enabled or disabled)."""
    from console.accounts import list_operators

    rows = list_operators(_db())
    if not rows:
        typer.echo("no operator accounts: the console accepts name 'operator' with TANDEM_CONSOLE_PASSWORD "
                   "(the default one on 127.0.0.1 only)")
    for row in rows:
        typer.echo(f"{row.name:24} created {row.created_at:%Y-%m-%d %H:%M}  {'disabled' if row.disabled else 'enabled'}")


@operators_cli.command("set-password")
def set_password(name: str = typer.Argument(...), password_stdin: bool = PASSWORD_STDIN) -> None:
    """Give an account a new password."""
    from console.accounts import set_password as store

    db = _db()
    store(db, name, _read_password(password_stdin))
    typer.echo(f"operator {name}: password changed")


@operators_cli.command("disable")
def disable(name: str = typer.Argument(...)) -> None:
    """Stop an account signing in (its open console session ends at its next page load)."""
    from console.accounts import set_disabled

    set_disabled(_db(), name, True)
    typer.echo(f"operator {name} disabled")


@operators_cli.command("enable")
def enable(name: str = typer.Argument(...)) -> None:
    """Let a disabled account sign in again."""
    from console.accounts import set_disabled

    set_disabled(_db(), name, False)
    typer.echo(f"operator {name} enabled")


@operators_cli.command("remove")
def remove(name: str = typer.Argument(...)) -> None:
    """Delete an account (its entries in the history keep its name). Removing the last one turns the shared
    TANDEM_CONSOLE_PASSWORD back on."""
    from console.accounts import has_accounts, remove_operator

    db = _db()
    remove_operator(db, name)
    left = "" if has_accounts(db) else "; no accounts left: the shared TANDEM_CONSOLE_PASSWORD works again"
    typer.echo(f"operator {name} removed{left}")
