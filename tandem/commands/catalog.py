"""`tandem catalog ...`: ingest a product feed, search it, ask a product fact, compare products, and rank product
attributes for questions in semiPQA's format."""

from __future__ import annotations

import json
from pathlib import Path

import typer

catalog_cli = typer.Typer(help="Product catalog: ingest a feed, search with filters, facts, comparisons.",
                          no_args_is_help=True)


def register(cli: typer.Typer) -> None:
    cli.add_typer(catalog_cli, name="catalog")


def _encoder():
    from core.encoders import load_encoder
    from core.settings import get_settings

    settings = get_settings()
    return load_encoder(settings.encoder, settings=settings)


def _catalog():
    from catalog.store import Catalog
    from core.settings import ensure_home, get_settings
    from storage.db import open_database

    settings = get_settings()
    if not settings.chroma_url:
        ensure_home(settings)
    return Catalog(open_database(settings.db_url).init(), _encoder(), chroma_path=settings.chroma_path,
                   url=settings.chroma_url)


def _search():
    from catalog.search import ProductSearch

    return ProductSearch(_catalog())


@catalog_cli.command("ingest")
def ingest(path: Path = typer.Argument(..., exists=True, dir_okay=False, help="Merchant Center TSV/CSV or Shopify CSV."),
           replace: bool = typer.Option(False, "--replace", help="Remove the products the feed does not list."),
           as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
           images: bool = typer.Option(True, help="Render missing product pictures and barcodes into TANDEM_HOME.")) -> None:
    """Add or update products (idempotent by id); bad rows are listed by line and the good rows still ingested.

    Exit code 1 when some rows were bad (the good ones are in), 0 otherwise.
    """
    from core.cpu import usable_cores

    catalog = _catalog()
    report = catalog.ingest(path, replace=replace, workers=usable_cores())  # a command of its own: every core
    if images:
        _render(catalog, force=False)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), ensure_ascii=False))
    else:
        for bad in report.bad:
            typer.echo(f"bad row: {bad}", err=True)
        typer.echo(report.summary())
    if report.bad:
        raise typer.Exit(1)


def _render(catalog, force: bool) -> tuple[int, int]:
    from catalog.images import render_all
    from core.settings import get_settings

    return render_all(catalog.products.values(), get_settings().home / "catalog", force=force)


@catalog_cli.command("render")
def render(force: bool = typer.Option(False, help="Render every picture and barcode again.")) -> None:
    """Render product pictures and EAN-13 barcode images into TANDEM_HOME/catalog (images/, barcodes/)."""
    from core.settings import get_settings

    pictures, barcodes = _render(_catalog(), force)
    typer.echo(f"rendered {pictures} picture(s) and {barcodes} barcode(s) under {get_settings().home / 'catalog'}")


@catalog_cli.command("search")
def search(query: str = typer.Argument(...), k: int = typer.Option(6, help="Cards to show at most."),
           as_json: bool = typer.Option(False, "--json", help="Print filters and cards as JSON.")) -> None:
    """Search with the filters parsed from the message; prints the filters, any relaxed constraint and the cards."""
    answer = _search().search(query, k=k)
    if as_json:
        typer.echo(answer.model_dump_json())
        return
    typer.echo(f"filters: {answer.filters.label or '(none)'}")
    if answer.note:
        typer.echo(answer.note)
    for c in answer.products:
        price = f"{c.sale_price:.2f} (was {c.price:.2f})" if c.sale_price is not None else f"{c.price:.2f}"
        typer.echo(f"{c.id}  {c.title}  {price} {c.currency}  {c.availability}  {c.link}")


@catalog_cli.command("fact")
def fact(question: str = typer.Argument(...), product: str = typer.Option("", help="Ask about this product id."),
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Answer a product fact from the record, with its source (product id, field), or say it is not stated."""
    answer = _search().fact(question, product_id=product or None)
    if as_json:
        typer.echo(answer.model_dump_json())
        return
    for f in answer.facts:
        typer.echo(f"{f.text}  [source: {f.product_id}, {f.field or '-'}]")
    if answer.note:
        typer.echo(answer.note)


@catalog_cli.command("compare")
def compare(query: str = typer.Argument("", help="e.g. 'your two cheapest desk lamps'"),
            product: list[str] = typer.Option(None, help="Product ids to compare (2-4), instead of a query."),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """A comparison table of 2-4 products; every cell comes from a record."""
    table = _search().compare(query, product_ids=product or None)
    typer.echo(table.model_dump_json() if as_json else table.markdown())


@catalog_cli.command("rank-attributes")
def rank_attributes_command(
        questions: Path = typer.Option(..., exists=True, dir_okay=False, help="semiPQA attribute-ranking TSV."),
        out: Path = typer.Option(..., help="Where to write one JSON line per question."),
        method: str = typer.Option("fused", help="fused (the chat's ranking), dense or overlap.")) -> None:
    """Rank each question's candidate attributes, best first, with the ranking product facts use. When the file has
    a label column, prints precision@1 over the questions with at least one relevant attribute."""
    from catalog.attributes import METHODS, rank_semipqa, read_semipqa

    if method not in METHODS:
        raise typer.BadParameter(f"method must be one of {', '.join(METHODS)}")
    data = read_semipqa(questions)
    hits = judged = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for qid, entry, ranked in rank_semipqa(data, _encoder(), method):
            order = [entry["pairs"][i] for i, _ in ranked]
            handle.write(json.dumps({"qid": qid, "ranked": order}) + "\n")
            labels = entry["labels"]
            if len(labels) == len(entry["pairs"]) and any(labels):
                judged += 1
                hits += labels[ranked[0][0]]
    typer.echo(f"wrote {len(data)} question(s) to {out}")
    if judged:
        typer.echo(f"precision@1 ({method}): {hits / judged:.3f} over {judged} question(s) with a relevant attribute")
