"""Versioned router settings: the live thresholds, who changed them, when and why.

The chain calls :func:`live_settings` on every message; it re-reads the table at most every
``refresh_s`` seconds, so a save in the console reaches the running app within seconds, no restart.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import select

from storage.db import session_scope
from storage.tables import RouterSettings
from tandem.settings import get_settings


class Thresholds(BaseModel):
    """The operator-tunable values, each with its validated range."""

    route_threshold: float = Field(ge=0.0, le=1.0)
    rewrite_threshold: float = Field(ge=0.0, le=1.0)
    cache_similarity: float = Field(ge=0.5, le=1.0)
    overload_enter: float = Field(ge=0.05, le=1.0)
    overload_exit: float = Field(ge=0.0, le=1.0)
    # LLM tiers as data (name, base_url, model, cost_per_1k_tokens, max_context, typical_latency_ms,
    # min_score); empty means the single endpoint from TANDEM_LLM_URL. See chains/llm/tiers.py.
    tiers: list[dict[str, Any]] = Field(default_factory=list)
    version: int = 0

    def model_post_init(self, _context: Any) -> None:
        if self.overload_exit >= self.overload_enter:
            raise ValueError("overload_exit must be below overload_enter (hysteresis)")

    @classmethod
    def defaults(cls) -> "Thresholds":
        s = get_settings()
        return cls(route_threshold=s.route_threshold, rewrite_threshold=s.rewrite_threshold,
                   cache_similarity=s.cache_similarity, overload_enter=s.overload_enter,
                   overload_exit=s.overload_exit)

    def values(self) -> dict[str, Any]:
        return self.model_dump(exclude={"version"})


def latest_row() -> RouterSettings | None:
    with session_scope() as session:
        return session.exec(select(RouterSettings).order_by(RouterSettings.version.desc()).limit(1)).first()


def history(limit: int = 50) -> list[RouterSettings]:
    with session_scope() as session:
        return list(session.exec(select(RouterSettings).order_by(RouterSettings.version.desc()).limit(limit)))


def save(values: dict[str, Any], author: str, reason: str) -> Thresholds:
    """Validate and store a new version; returns it. Partial dicts keep the other current values."""
    current = current_thresholds().values()
    merged = Thresholds(**{**current, **values})
    row = RouterSettings(author=author or "unknown", reason=reason, values=merged.values())
    with session_scope() as session:
        session.add(row)
        session.commit()
        session.refresh(row)
    _LIVE.invalidate()
    return merged.model_copy(update={"version": row.version})


def rollback(version: int, author: str) -> Thresholds:
    with session_scope() as session:
        row = session.get(RouterSettings, version)
    if row is None:
        raise ValueError(f"no settings version {version}")
    return save(dict(row.values), author, f"rollback to version {version}")


def current_thresholds() -> Thresholds:
    row = latest_row()
    if row is None:
        return Thresholds.defaults()
    return Thresholds(**{**Thresholds.defaults().values(), **row.values, "version": row.version})


def ensure_seeded() -> Thresholds:
    if latest_row() is None:
        return save(Thresholds.defaults().values(), "system", "defaults from settings")
    return current_thresholds()


class _LiveCache:
    def __init__(self, refresh_s: float = 2.0):
        self.refresh_s = refresh_s
        self._value: Thresholds | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def get(self) -> Thresholds:
        now = time.monotonic()
        with self._lock:
            if self._value is None or now - self._read_at > self.refresh_s:
                try:
                    self._value = current_thresholds()
                except Exception:
                    # A locked or unreachable database must not stop answers: keep the last values.
                    self._value = self._value or Thresholds.defaults()
                self._read_at = now
            return self._value

    def invalidate(self) -> None:
        with self._lock:
            self._value = None


_LIVE = _LiveCache()


def live_settings() -> Thresholds:
    return _LIVE.get()


def invalidate_live_settings() -> None:
    _LIVE.invalidate()
