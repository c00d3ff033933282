"""`tandem ops run|watch|alerts|ack|purge|recurring`: the ops autopilot from the command line (cron, or a terminal)."""

from __future__ import annotations

import time

import typer

ops_cli = typer.Typer(help="Anomaly alerts and automatic threshold tuning (also run inside the app).",
                      no_args_is_help=True)


def register(cli: typer.Typer) -> None:
    cli.add_typer(ops_cli, name="ops")


def _database():
    from chains.bootstrap import prepare_storage
    from core.settings import get_settings

    settings = get_settings()
    return settings, prepare_storage(settings)


def _print(report) -> None:
    if not report.ran:
        typer.echo(report.note)
        return
    for state in report.states:
        if state.status == "learning":
            typer.echo(f"{state.name:24} learning ({state.minutes} of {state.detail['needs_minutes']} minutes)")
        else:
            typer.echo(f"{state.name:24} {state.status:6} latest {state.value:.4g}  usual {state.baseline:.4g} "
                       f"± {state.spread:.2g}  CUSUM {state.score}")
    for alert in report.new_alerts:
        typer.echo(f"NEW ALERT #{alert.id}: {alert.message}")
    if report.delivered:
        typer.echo(f"webhook: {report.delivered} delivered")
    if report.tuner_event is not None:
        typer.echo(f"autotune: {report.tuner_event.kind}: {report.tuner_event.message}")
    if report.purged is not None:
        typer.echo(f"retention: {report.purged.summary()}")


@ops_cli.command("run")
def run(tune: bool = typer.Option(False, "--tune", help="Take a tuner step now (when autotune is switched on), "
                                  "even if the window has not passed.")) -> None:
    """One pass: detect, alert (and notify TANDEM_ALERT_WEBHOOK), tune when due. For cron: `* * * * *`."""
    from ops.job import run_once

    settings, db = _database()
    _print(run_once(db, webhook=settings.alert_webhook, price_per_1k_tokens=settings.llm_price_per_1k_tokens,
                    force_tuner=tune, keep_lease=False, retention_days=settings.retention_days))


@ops_cli.command("watch")
def watch(every_min: float = typer.Option(1.0, min=0.1, help="Minutes between passes.")) -> None:
    """Run a pass every N minutes until Ctrl-C."""
    from ops.job import run_once

    settings, db = _database()
    try:
        while True:
            _print(run_once(db, webhook=settings.alert_webhook, price_per_1k_tokens=settings.llm_price_per_1k_tokens,
                            retention_days=settings.retention_days))
            time.sleep(every_min * 60)
    except KeyboardInterrupt:
        pass


@ops_cli.command("alerts")
def list_alerts(all_: bool = typer.Option(False, "--all", help="Also the resolved ones.")) -> None:
    """Open (and acknowledged) alerts, newest first."""
    from ops.alerts import open_alerts, recent_alerts

    _, db = _database()
    alerts = recent_alerts(db) if all_ else open_alerts(db)
    for alert in alerts:
        typer.echo(f"#{alert.id} {alert.created_at:%Y-%m-%d %H:%M} {alert.state:12} {alert.message}")
    if not alerts:
        typer.echo("no alerts" if all_ else "no open alerts (`tandem ops alerts --all` lists resolved ones too)")


@ops_cli.command("ack")
def ack(alert_id: int, who: str = typer.Option("cli", help="Who acknowledges.")) -> None:
    """Acknowledge an open alert."""
    from ops.alerts import acknowledge

    _, db = _database()
    if not acknowledge(db, alert_id, who):
        raise typer.BadParameter(f"no open alert #{alert_id}")
    typer.echo(f"acknowledged #{alert_id}")


@ops_cli.command("purge")
def purge(days: float = typer.Option(None, "--days", min=0, help="Purge message text older than N days "
                                     "(default: TANDEM_RETENTION_DAYS).")) -> None:
    """Purge message text (requests, conversation memory, feedback comments, handoff notes) older than N days;
    the rows and their numbers stay for statistics (storage/retention.py)."""
    from storage.retention import purge as purge_text

    settings, db = _database()
    days = settings.retention_days if days is None else days
    if days <= 0:
        raise typer.BadParameter("give --days N (more than 0), or set TANDEM_RETENTION_DAYS", param_hint="--days")
    typer.echo(purge_text(db, days).summary())


@ops_cli.command("recurring")
def recurring(days: float = typer.Option(7.0, "--days", min=0, help="Look back N days (0: the whole log)."),
              top: int = typer.Option(20, "--top", min=1, help="Show the K largest groups.")) -> None:
    """LLM-bound questions that recur: the messages the router sent to the LLM, grouped by meaning in the knowledge
    base's embedding, largest group first. A personal group (order number, email, phone, name) is flagged: answers
    are never prepared for it (issue 42)."""
    from datetime import UTC, datetime, timedelta

    from chains.runtime import open_kb
    from core.encoders import load_encoder
    from ops.recurring import recurring_questions, table_rows

    settings, db = _database()
    kb = open_kb(settings, load_encoder(settings.encoder, settings.home, settings=settings))
    since = datetime.now(UTC) - timedelta(days=days) if days else None
    rows = table_rows(recurring_questions(db, kb.embed_messages, since=since, space_of=kb.space_for, top=top),
                      settings.mask_pii)
    span = f"the last {days:g} days" if days else "the whole log"
    if not rows:
        typer.echo(f"no LLM-bound question recurs in {span}")
        return
    typer.echo(f"{'count':>5} {'sessions':>8}  {'last seen':16}  {'personal':8}  question")
    for row in rows:
        flag = f"yes ({row['personal_data']})" if row["personal"] else "no"
        typer.echo(f"{row['count']:>5} {row['sessions']:>8}  {row['last_seen']:%Y-%m-%d %H:%M}  {flag:8}  "
                   f"{row['question']}")
        if row["examples"]:
            typer.echo(f"{'':44}e.g. {row['examples']}")
