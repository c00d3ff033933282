"""`tandem ask`, `tandem route-batch`, `tandem eval` and `tandem router ...` (train, info, promote, rollback)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

router_cli = typer.Typer(help="The learned router: train, inspect, promote, roll back.", no_args_is_help=True)


def register(cli: typer.Typer) -> None:
    cli.command("ask")(ask)
    cli.command("route-batch")(route_batch)
    cli.command("eval")(evaluate)
    cli.add_typer(router_cli, name="router")


def ask(text: str = typer.Argument(None, help="The customer's message."),
        user: str = typer.Option("", "--user", help="Customer id: this operator CLI speaks as them (orders, history)."),
        session: str = typer.Option("", "--session", help="Session id, for conversation memory."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
        file: Path = typer.Option(None, "--file", exists=True, dir_okay=False,
                                  help="Answer every line of this file, one message each (one JSON line each).")
        ) -> None:
    """Answer one message through the full chain (logged like any other request)."""
    from chains.bootstrap import bootstrap
    from chains.runtime import build_runtime
    from chains.schema import ChatRequest

    if (text is None) == (file is None):
        raise typer.BadParameter("give either TEXT or --file")
    runtime = build_runtime()
    for _ in bootstrap(runtime.settings, runtime.kb, db=runtime.db):
        pass
    try:
        if file is not None:
            for line in file.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    response = runtime.service.answer(ChatRequest(message=line, user_id=user, customer=user,
                                                                  session_id=session, channel="cli"))
                    typer.echo(json.dumps(response.public(), ensure_ascii=False))
            return
        response = runtime.service.answer(ChatRequest(message=text, user_id=user, customer=user, session_id=session,
                                                      channel="cli"))
    finally:
        runtime.close()
    if as_json:
        typer.echo(json.dumps(response.public(), ensure_ascii=False))
        return
    badge = response.route + (" (degraded)" if response.degraded else "") + (" (fallback)" if response.fallback else "")
    typer.echo(response.answer)
    typer.echo(f"\n[{badge}] {response.latency_ms.get('total', 0):.0f} ms; " + "; ".join(response.reasons))


def route_batch(kb: Path = typer.Option(..., "--kb", exists=True, help="answers CSV (answer_id,answer,...)"),
                questions: Path = typer.Option(None, "--questions", exists=True, help="questions CSV (query,answer_id)"),
                queries: Path = typer.Option(..., "--queries", exists=True, help="queries CSV (query_id,query,...)"),
                out: Path = typer.Option(..., "--out", help="JSON lines to write"),
                router: str = typer.Option(None, "--router", help="Router name (default: settings)."),
                tau: float = typer.Option(None, "--tau", help="Threshold (default: the live settings value)."),
                tune: bool = typer.Option(True, "--tune/--no-tune", help="Tune the encoder on the KB first, as "
                                          "the product does (minutes the first time; cached by the KB's content "
                                          "under $TANDEM_HOME/encoders)."),
                progress: bool = typer.Option(True, help="Show a progress bar while tuning.")) -> None:
    """Route every query of a CSV against a throwaway KB, without calling any LLM."""
    from offline.route_batch import read_queries, route_rows

    rows = read_queries(queries)
    start = time.perf_counter()
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        for record in route_rows(kb, questions, rows, router_name=router, tau=tau, tune=tune, progress=progress,
                                 log=lambda line: typer.echo(line, err=True)):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    elapsed = time.perf_counter() - start
    typer.echo(f"routed {count} queries in {elapsed:.1f} s ({count / max(elapsed, 1e-9):.1f}/s incl. KB build) "
               f"-> {out}", err=True)


@router_cli.command("train")
def router_train(out: Path = typer.Option(None, help="Artifact path (default: chains/artifacts/router.json)"),
                 only: list[str] = typer.Option(None, "--only", help="Rebuild only these validation groups of the "
                                                "stored table, then refit (e.g. --only zh)."),
                 tune: bool = typer.Option(True, help="Tune the encoder on each training KB (cached by content)."),
                 refit: bool = typer.Option(False, help="Fit again on the stored table (seconds; no scoring).")
                 ) -> None:
    """Fit the evidence router, its draft-quality model and the product thresholds on train/valid data."""
    from chains.routers.artifacts import SHIPPED_ARTIFACT
    from offline.router_training import GROUPS, train

    unknown = sorted(set(only or []) - set(GROUPS))
    if unknown:
        raise typer.BadParameter(f"unknown group(s) {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    metrics = train(out or SHIPPED_ARTIFACT, log=lambda line: typer.echo(line, err=True), tune=tune,
                    only=[] if refit else (only or None))
    typer.echo(json.dumps(metrics, indent=1))


def _database():
    from chains.bootstrap import prepare_storage
    from core.settings import get_settings

    return prepare_storage(get_settings())


@router_cli.command("info")
def router_info() -> None:
    """Which router is live, when it was trained, on what, and its validation metrics."""
    from chains.routers.artifacts import live

    artifact = live(_database())
    typer.echo(json.dumps({"version": artifact.version, "source": artifact.source,
                           "trained": artifact.params.get("trained"),
                           "training_data": artifact.params.get("training_data"),
                           "metrics": artifact.params.get("metrics")}, indent=1))


@router_cli.command("promote")
def router_promote(candidate: Path = typer.Argument(None, help="Artifact to make live (default: the last candidate "
                                                               "from feedback retraining)."),
                   who: str = typer.Option("cli", "--by", help="Who promotes (kept in the history)."),
                   note: str = typer.Option("", help="Why.")) -> None:
    """Make a trained router live in every app replica sharing the database (within seconds, no restart)."""
    from chains.routers.artifacts import candidate_path, promote
    from core.settings import get_settings

    path = candidate or candidate_path(get_settings().home)
    typer.echo(f"live: router v{promote(_database(), path, who, note or f'promoted from {path.name}')}")


@router_cli.command("rollback")
def router_rollback(who: str = typer.Option("cli", "--by", help="Who rolls back.")) -> None:
    """Retire the live router: the one promoted before it (or the shipped one) is live again."""
    from chains.routers.artifacts import rollback

    restored = rollback(_database(), who)
    typer.echo(f"live: router v{restored.version} ({restored.source})")


def evaluate(out: Path = typer.Option(Path("reports/eval.json"), help="Where to write the figures."),
             limit: int = typer.Option(0, help="Use at most N test queries per set (quick look)."),
             answers: bool = typer.Option(True, "--answers/--no-answers", help="Also score the final answers "
                                          "through the whole chain with the real vLLM (the answers section)."),
             answers_only: bool = typer.Option(False, "--answers-only", help="Only the answers section (the "
                                               "routing figures already in --out are kept)."),
             sets: str = typer.Option("demo,heldout,zh", "--sets", help="Answer sets, comma-separated: demo "
                                      "(the demo shop's held-out split), demo-dev, heldout (Bitext), zh."),
             triggers_only: bool = typer.Option(False, "--triggers-only", help="Only the handoff_triggers section "
                                                "(seconds, no model; the other figures already in --out are kept)."),
             catalog_only: bool = typer.Option(False, "--catalog-only", help="Only the catalog section (the "
                                               "hand-written product messages over the demo catalog, and semiPQA; "
                                               "a minute or two, no LLM; the other figures in --out are kept).")
             ) -> None:
    """Routing quality on the test files, thresholds chosen on train/valid; then the quality of the final answers
    (`make eval`, which then renders the report into docs/results.md with `python -m scripts.gen_docs`)."""
    log = lambda line: typer.echo(line, err=True)  # noqa: E731
    chosen = [name.strip() for name in sets.split(",") if name.strip()]
    if answers or answers_only:
        from offline.answer_eval import EVAL_SETS

        unknown = sorted(set(chosen) - set(EVAL_SETS))
        if unknown:
            raise typer.BadParameter(f"unknown set(s) {', '.join(unknown)}; known: {', '.join(EVAL_SETS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if catalog_only or triggers_only:
        # One section alone, merged into the report: the rest of it stays as the last full run wrote it.
        if catalog_only:
            from offline.catalog_eval import markdown as section_markdown
            from offline.catalog_eval import run_catalog_eval as run_section
        else:
            from offline.handoff_eval import markdown as section_markdown
            from offline.handoff_eval import run_handoff_eval as run_section  # type: ignore[assignment]
        key = "catalog" if catalog_only else "handoff_triggers"
        report = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
        report[key] = run_section(log=log)
        out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        typer.echo(section_markdown(report[key]))
        log(f"wrote {out}")
        return
    if answers_only:
        report = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    else:
        from offline.evaluate import run_eval

        report = run_eval(limit=limit or None, log=log)
        # written now, so the routing figures are kept even if the answers section fails
        out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        typer.echo(json.dumps(report["summary"], indent=1))
    if answers or answers_only:
        from core.settings import get_settings
        from offline.answer_eval import run_answer_eval
        from offline.answer_report import markdown as answers_markdown
        from tandem.llm_server import eval_endpoint

        records = out.with_name("answers.jsonl")
        report["answers"] = run_answer_eval(chosen, limit or None, log, records_path=records,
                                            endpoint=eval_endpoint(get_settings(), log))
        out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        table = answers_markdown(report["answers"])
        typer.echo(table)
        log(f"per-message records: {records}")
    log(f"wrote {out}")
