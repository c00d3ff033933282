"""Alerts: stored (the `alerts` table), acknowledged in the console, resolved when the series is calm again,
exported as a Prometheus gauge per series and state, and sent to an optional webhook (with retries)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from prometheus_client import Gauge
from sqlmodel import col, select

from chains.metrics import get_or_create
from core.pii import host_of
from ops.detector import RESOLVE_MINUTES, SeriesState
from storage.db import Database
from storage.tables import Alert, utcnow

log = logging.getLogger(__name__)
SERIES_STATE = get_or_create(Gauge, "tandem_ops_series_state",
                             "Ops detector state per series: 0 learning, 1 ok, 2 alert.", labelnames=["series"])
SERIES_SCORE = get_or_create(Gauge, "tandem_ops_series_score", "Ops detector CUSUM per series (alerts at 3).",
                             labelnames=["series"])
STATE_CODE = {"learning": 0, "ok": 1, "alert": 2}


def open_alerts(db: Database) -> list[Alert]:
    with db.session() as session:
        return list(session.exec(select(Alert).where(col(Alert.state).in_(["open", "acknowledged"]))
                                 .order_by(col(Alert.created_at).desc())))


def recent_alerts(db: Database, limit: int = 200) -> list[Alert]:
    with db.session() as session:
        return list(session.exec(select(Alert).order_by(col(Alert.created_at).desc()).limit(limit)))


def acknowledge(db: Database, alert_id: int, who: str) -> bool:
    with db.session() as session:
        alert = session.get(Alert, alert_id)
        if alert is None or alert.state != "open":
            return False
        alert.state, alert.acknowledged_by, alert.acknowledged_at = "acknowledged", who, utcnow()
        session.add(alert)
        session.commit()
        return True


def raise_alert(db: Database, series: str, message: str, now: datetime, detail: dict | None = None,
                state: SeriesState | None = None) -> Alert:
    alert = Alert(created_at=now, series=series, message=message, detail=detail or {},
                  direction=state.direction if state else "up", value=_finite(state.value) if state else 0.0,
                  baseline=_finite(state.baseline) if state else 0.0, spread=_finite(state.spread) if state else 0.0,
                  score=state.score if state else 0.0)
    with db.session() as session:
        session.add(alert)
        session.commit()
        session.refresh(alert)
    return alert


def reconcile(db: Database, states: Sequence[SeriesState], now: datetime) -> list[Alert]:
    """Open an alert for a series that crossed, resolve the open ones whose series is calm; returns new alerts."""
    current = {a.series: a for a in open_alerts(db)}
    new = []
    for state in states:
        SERIES_STATE.labels(series=state.name).set(STATE_CODE[state.status])
        SERIES_SCORE.labels(series=state.name).set(state.score)
        existing = current.get(state.name)
        if state.status == "alert" and existing is None:
            word = "rose" if state.direction == "up" else "fell"
            new.append(raise_alert(db, state.name, f"{state.name} {word} to {state.value:.3g} (usual {state.baseline:.3g} "
                                                   f"± {state.spread:.2g}; CUSUM {state.score})", now, state=state))
        elif existing is not None and state.status == "ok" and state.calm_minutes >= RESOLVE_MINUTES:
            with db.session() as session:
                alert = session.get(Alert, existing.id)
                if alert is not None:
                    alert.state, alert.resolved_at = "resolved", now
                    session.add(alert)
                    session.commit()
    return new


def notify(db: Database, url: str, alerts: Sequence[Alert], tries: int = 3,
           sleep: Callable[[float], None] = time.sleep) -> int:
    """POST each alert as JSON to the webhook; retried with backoff; returns how many were delivered."""
    import httpx

    delivered = 0
    for alert in alerts:
        body = {"id": alert.id, "series": alert.series, "state": alert.state, "message": alert.message,
                "value": alert.value, "baseline": alert.baseline, "created_at": alert.created_at.isoformat()}
        for attempt in range(tries):
            try:
                response = httpx.post(url, json=body, timeout=5)
                if response.status_code < 300:
                    delivered += 1
                    with db.session() as session:
                        stored = session.get(Alert, alert.id)
                        if stored is not None:
                            stored.notified = True
                            session.add(stored)
                            session.commit()
                    break
            except httpx.HTTPError as exc:
                log.warning("alert webhook %s: %s", host_of(url), exc)
            sleep(0.5 * 2 ** attempt)
    return delivered


def _finite(value: float) -> float:
    """NaN and infinities (a series with no data, a zero spread) stored as 0: the database and JSON want numbers."""
    return float(value) if math.isfinite(value) else 0.0

