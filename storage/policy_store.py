"""Versioned routing policy: every save is a new row (who, when, why); the highest version is live.

The running app reads the newest version through :class:`chains.policy.LivePolicy`, which re-reads it every
few seconds, so a save in the console reaches every app process without a restart.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import col, select

from core.policy import Thresholds
from storage.db import Database
from storage.tables import RouterSettings


def latest_row(db: Database) -> RouterSettings | None:
    with db.session() as session:
        return session.exec(select(RouterSettings).order_by(col(RouterSettings.version).desc()).limit(1)).first()


def history(db: Database, limit: int = 50) -> list[RouterSettings]:
    with db.session() as session:
        return list(session.exec(select(RouterSettings).order_by(col(RouterSettings.version).desc()).limit(limit)))


def current(db: Database) -> Thresholds:
    row = latest_row(db)
    if row is None:
        return Thresholds.shipped()
    # a key a later release added, missing from an older saved version, takes its released default
    return Thresholds(**{**Thresholds.shipped().values(), **row.values, "version": row.version})


def save(db: Database, values: dict[str, Any], author: str, reason: str,
         evidence: dict[str, Any] | None = None) -> Thresholds:
    """Validate and store a new version; returns it. Partial dicts keep the other current values."""
    merged = Thresholds(**{**current(db).values(), **values})
    row = RouterSettings(author=author or "unknown", reason=reason, values=merged.values(), evidence=evidence or {})
    with db.session() as session:
        session.add(row)
        session.commit()
        session.refresh(row)
    return merged.model_copy(update={"version": row.version})


def rollback(db: Database, version: int, author: str) -> Thresholds:
    with db.session() as session:
        row = session.get(RouterSettings, version)
    if row is None:
        raise ValueError(f"no settings version {version}")
    return save(db, dict(row.values), author, f"rollback to version {version}")


def ensure_seeded(db: Database, defaults: Thresholds) -> Thresholds:
    """The newest saved version; on a new database, ``defaults`` (the settings' policy) saved as version 1 first."""
    if latest_row(db) is None:
        return save(db, defaults.values(), "system", "defaults from settings")
    return current(db)
