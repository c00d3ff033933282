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


# Each package registers its own sub-commands with `register(cli)`; a missing module is skipped.
PLUGINS = ("knowledge.cli", "chains.cli", "chains.llm.cli", "app.cli", "console.cli", "tandem.launcher")


def _mount_plugins() -> None:
    import importlib

    for module in PLUGINS:
        try:
            importlib.import_module(module).register(cli)
        except ModuleNotFoundError as exc:
            if not module.startswith(exc.name or "\0"):  # the plugin itself is absent, not one of its imports
                raise


def main() -> None:
    _mount_plugins()
    try:
        cli()
    except TandemError as exc:
        print(f"tandem: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
