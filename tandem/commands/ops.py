"""`tandem ops run|watch|alerts|ack|purge`: the ops autopilot from the command line (cron, or a terminal)."""

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
