"""The `tandem` command line. Sub-commands of other packages are mounted here, imported lazily."""

from __future__ import annotations

import sys

import typer

from tandem.errors import TandemError

cli = typer.Typer(help="Tandem: hybrid-inference customer-service chat.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
models_cli = typer.Typer(help="Local models shipped in wheels.", no_args_is_help=True)
cli.add_typer(models_cli, name="models")


@cli.command()
def doctor(load: bool = typer.Option(True, help="Also load each model and run it once.")) -> None:
    """Versions, models, database and LLM endpoint. Exits 0 when the local parts are healthy."""
    from tandem.doctor import run_doctor

    raise typer.Exit(run_doctor(load=load))


@models_cli.command("prepare")
def models_prepare(force: bool = typer.Option(False, help="Convert again even if done.")) -> None:
    """Convert the SmolLM2 GGUF once into a plain model folder under $TANDEM_HOME/models."""
    from tandem.models import prepare_smollm2
    from tandem.settings import ensure_home

    ensure_home()
    typer.echo(f"SmolLM2 ready at {prepare_smollm2(force=force)}")


@models_cli.command("list")
def models_list() -> None:
    """Registered models and where they resolve."""
    from tandem.models import REGISTRY, ModelError

    for spec in REGISTRY.values():
        try:
            where = str(spec.locate())
        except ModelError as exc:
            where = f"MISSING: {exc}"
        typer.echo(f"{spec.name:13} {spec.package:32} {where}")


@cli.command("init")
def init(seed: bool = typer.Option(True, help="Seed demo orders and the demo knowledge base when empty.")) -> None:
    """Create the database tables, seed default thresholds, demo orders and the demo knowledge base."""
    from tandem.bootstrap import bootstrap

    for line in bootstrap(seed=seed):
        typer.echo(line)


def _mount_optional() -> None:
    """Packages register their own sub-commands; each is imported only when its module exists."""
    import importlib

    for module, attr, name in (("knowledge.cli", "kb_cli", "kb"), ("chains.cli", "router_cli", "router")):
        try:
            sub = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError:
            continue
        cli.add_typer(sub, name=name)
    try:
        importlib.import_module("chains.cli").register(cli)
    except (ModuleNotFoundError, AttributeError):
        pass


def main() -> None:
    _mount_optional()
    try:
        cli()
    except TandemError as exc:
        print(f"tandem: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
