"""The `tandem` command line: every sub-command, mounted from :mod:`tandem.commands` (heavy imports stay lazy)."""

from __future__ import annotations

import os
import sys

import typer

from core.errors import TandemError
from tandem.commands import access, catalog, cluster, console, demo, kb, llm, operators, ops, routing, serve

# transformers draws a "Loading weights" bar for every model it loads; on a terminal that is noise around a one-line
# answer or error. Our own progress bars (ingest, tuning, conversion) are plain tqdm and stay.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

cli = typer.Typer(help="Tandem: hybrid-inference customer-service chat.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
models_cli = typer.Typer(help="Local models shipped in wheels.", no_args_is_help=True)
cli.add_typer(models_cli, name="models")


@cli.command()
def doctor(load: bool = typer.Option(True, help="Also load each model and run it once.")) -> None:
    """Versions, models, encoder, database, vLLM and the LLM endpoint. Exits 0 when the local parts are healthy."""
    from tandem.doctor import run_doctor

    raise typer.Exit(run_doctor(load=load))


@models_cli.command("prepare")
def models_prepare(force: bool = typer.Option(False, help="Convert and export again even if done.")) -> None:
    """Convert the LLM stand-in TANDEM_LLM_MODEL selects (qwen2.5-0.5b, qwen2.5-1.5b or smollm2) once from its GGUF into a plain
    model folder and its vLLM copy, and export MiniLM to ONNX."""
    from core.model_files import local_llm, prepare_llm
    from core.settings import ensure_home, get_settings
    from tandem.llm_server import prepare_model_folder

    settings = get_settings()
    ensure_home(settings)
    llm = local_llm(settings)
    typer.echo(f"{llm.title} ({llm.name}) ready at {prepare_llm(llm, settings.models_dir, force=force)}")
    typer.echo(f"vLLM model folder ready at {prepare_model_folder(settings)}")
    typer.echo(f"MiniLM {export_base_encoder(settings, force)}")


def export_base_encoder(settings, force: bool = False, name: str = "minilm") -> str:
    """A base encoder (the registry's ``minilm``) exported to ONNX (once; `--force` again), gated on the demo KB's
    questions."""
    import csv
    import json

    from core.encoders import EXPORT_FILE, export_dir, folder_version
    from core.model_files import model_path
    from knowledge.demo_kb import DEMO_DIR
    from offline.encoder_export import export_and_gate, gate_summary

    folder = model_path(name, settings.models_dir)
    out = export_dir(folder, settings.home)
    marker = out / EXPORT_FILE
    if marker.is_file() and not force:
        record = json.loads(marker.read_text())
        if record.get("version") == folder_version(folder):
            return f"served by {record['chosen']} ({out})"
    with (DEMO_DIR / "questions.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    record = export_and_gate(folder, out, [r["query"] for r in rows], [r["answer_id"] for r in rows],
                             log=lambda line: None)
    return f"exported to ONNX: serving {record['chosen']} ({gate_summary(record)}) at {out}"


@models_cli.command("list")
def models_list() -> None:
    """Registered models and where they resolve."""
    from core.model_files import REGISTRY, ModelError
    from core.settings import get_settings

    models_dir = get_settings().models_dir
    for spec in REGISTRY.values():
        try:
            where = str(spec.locate(models_dir))
        except ModelError as exc:
            where = f"MISSING: {exc}"
        typer.echo(f"{spec.name:13} {spec.package:32} {where}")


@cli.command("init")
def init(seed: bool = typer.Option(True, help="Seed demo orders and the demo knowledge base when empty.")) -> None:
    """Create the database tables, seed default thresholds, demo orders and the demo knowledge base."""
    from chains.bootstrap import bootstrap
    from chains.runtime import open_kb
    from core.encoders import load_encoder
    from core.settings import get_settings

    settings = get_settings()
    kb = open_kb(settings, load_encoder(settings.encoder, settings=settings)) if seed else None
    for line in bootstrap(settings, kb, seed=seed):
        typer.echo(line)


for module in (kb, routing, llm, serve, console, operators, access, demo, cluster, ops, catalog):
    module.register(cli)


def main() -> None:
    try:
        cli()
    except TandemError as exc:
        print(f"tandem: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
