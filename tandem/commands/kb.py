"""`tandem kb ...`: ingest, remove, list, version, stats and eval of the knowledge base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from core.errors import TandemError

kb_cli = typer.Typer(help="Knowledge base: ingest FAQ sources, inspect, evaluate retrieval.", no_args_is_help=True)


def register(cli: typer.Typer) -> None:
    cli.add_typer(kb_cli, name="kb")


def _kb():
    from chains.runtime import open_kb
    from core.encoders import load_encoder
    from core.settings import ensure_home, get_settings

    settings = get_settings()
    if not settings.chroma_url:
        ensure_home(settings)
    return open_kb(settings, load_encoder(settings.encoder, settings=settings))


def _where(values: list[str] | None) -> dict[str, str] | None:
    out = {}
    for item in values or []:
        column, sep, value = item.partition("=")
        if not sep or not column.strip():
            raise TandemError(f"--where expects COLUMN=VALUE, got '{item}'")
        out[column.strip().lower()] = value.strip()
    return out or None


@kb_cli.command("ingest")
def ingest(paths: list[Path] = typer.Argument(..., help="Answer/question CSVs, Markdown FAQs, text files or folders."),
           progress: bool = typer.Option(True, help="Show a progress bar for long ingests.")) -> None:
    """Add or update entries (idempotent by answer_id). Bad rows are listed; good rows are still ingested.

    Exit code 1 when some rows were bad (the good ones are in), 0 otherwise.
    """
    report = _kb().ingest(paths, progress=progress)
    for bad in report.bad:
        typer.echo(f"bad row: {bad}", err=True)
    typer.echo(report.summary())
    if report.bad:
        raise typer.Exit(1)


@kb_cli.command("remove")
def remove(answer_id: str = typer.Argument(..., help="The answer_id to delete (with its questions).")) -> None:
    """Delete one entry: the answer and its example questions."""
    kb = _kb()
    if not kb.remove(answer_id):
        raise TandemError(f"no entry with answer_id '{answer_id}'. See: tandem kb list --search TEXT")
    typer.echo(f"removed {answer_id}; version {kb.version}")


@kb_cli.command("list")
def list_entries(search: Optional[str] = typer.Option(None, "--search", "-s", help="Case-insensitive substring filter."),
                 as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """Entries with title, category and number of example questions."""
    rows = _kb().entries(search)
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for row in rows:
        typer.echo(f"{row['answer_id']:28} {row['category'][:12]:12} {row['questions']:3}q  {row['title'][:70]}")
    typer.echo(f"{len(rows)} entries")


@kb_cli.command("tune")
def tune(reset: bool = typer.Option(False, "--reset", help="Go back to the base MiniLM; the tuned folders are "
                                   "kept."),
         progress: bool = typer.Option(True, help="Show a progress bar.")) -> None:
    """Adapt the encoder to this knowledge base (contrastive fine-tuning on its own questions and answers).

    The tuned encoder is written under $TANDEM_HOME/encoders and becomes the encoder of the KB, the cache and
    the router of every process on this data directory (running apps follow within seconds). Tuning the same
    KB content again reuses the folder. About 5 to 9 minutes for 5,000 questions on 2 CPU cores.
    """
    from chains.runtime import open_kb
    from core.encoders import load_encoder, set_active_tuned_folder
    from core.settings import ensure_home, get_settings
    from offline.encoder_tuning import top1_agreement, tune_for_kb

    settings = get_settings()
    ensure_home(settings)
    if reset:
        set_active_tuned_folder(settings.home, None)
        kb = open_kb(settings, load_encoder("minilm", settings=get_settings()))  # re-embeds with the base encoder
        typer.echo(f"back to the base MiniLM; knowledge base version {kb.version}")
        return
    kb = _kb()
    if not len(kb):
        raise TandemError("the knowledge base is empty. Fix: `tandem kb ingest <files>` first")
    folder = tune_for_kb(kb, settings.home, progress=progress, log=typer.echo)
    questions, _ = kb.training_texts()
    from core.encoders import export_dir
    from offline.encoder_export import export_and_gate

    pairs = [(q, label) for label, items in questions.items() for q in items][:3000]
    export_and_gate(folder, export_dir(folder, settings.home), [q for q, _ in pairs], [a for _, a in pairs],
                    log=typer.echo)
    before = top1_agreement(load_encoder("minilm", settings=get_settings()), questions)
    set_active_tuned_folder(settings.home, folder)
    tuned = load_encoder(home=settings.home, settings=settings)
    if tuned.problem:
        raise TandemError(tuned.problem)
    after = top1_agreement(tuned, questions)
    kb = open_kb(settings, tuned)  # re-embeds every record with the tuned encoder, once
    typer.echo(f"encoder {tuned.name} {tuned.version} is live ({folder}); nearest-question top-1 on the KB's own "
               f"questions {before:.3f} -> {after:.3f}; knowledge base version {kb.version}")


@kb_cli.command("version")
def version() -> None:
    """The content hash of the knowledge base (changes on every change)."""
    typer.echo(_kb().version)


@kb_cli.command("stats")
def stats(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Counts of answers, questions and records, per category and per source."""
    data = _kb().stats()
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    typer.echo(f"version {data['version']}: {data['answers']} answers, {data['questions']} questions, "
               f"{data['records']} records in {data['store']} ({data['collection']})")
    typer.echo(f"out-of-scope examples: {data['out_of_scope_examples']} of its own, "
               f"{data['starter_examples']} of Tandem's starter set")
    typer.echo("categories: " + ", ".join(f"{k} {v}" for k, v in sorted(data["categories"].items())))
    typer.echo("sources: " + ", ".join(f"{k} {v}" for k, v in sorted(data["sources"].items())))


@kb_cli.command("eval")
def evaluate(kb: Path = typer.Option(..., "--kb", exists=True, dir_okay=False,
                                     help="Answers CSV (answer_id,answer,...) or a questions CSV for intent sets."),
             queries: Path = typer.Option(..., "--queries", exists=True, dir_okay=False, help="Labelled queries CSV."),
             questions: Optional[Path] = typer.Option(None, "--questions", exists=True, dir_okay=False,
                                                      help="Example questions indexed as paraphrases."),
             id_column: str = typer.Option("answer_id", "--id-column", "--label-column",
                                           help="Label column in the KB and query files (e.g. intent)."),
             query_column: str = typer.Option("query", "--query-column", help="Text column of the queries."),
             where: Optional[list[str]] = typer.Option(None, "--where", help="Keep rows with COLUMN=VALUE (repeatable), "
                                                       "in KB and queries, e.g. in_scope=True."),
             limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Evaluate a fixed-seed sample of N queries."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Top-1/top-3 accuracy and latency of a throwaway KB built from --kb (+ --questions)."""
    from core.encoders import load_encoder
    from core.settings import get_settings
    from offline.kb_eval import evaluate as run_eval

    encoder = load_encoder(settings=get_settings())
    result = run_eval(encoder, kb, queries, questions, id_column=id_column.lower(), query_column=query_column,
                      where=_where(where), limit=limit, progress=not as_json)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        for line in result.lines():
            typer.echo(line)
