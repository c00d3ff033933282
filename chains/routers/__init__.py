"""Routers: one contract (`score(query, context) -> p_llm`), a registry by name, and the live router source."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chains.routers import combined, evidence, learned, similarity  # noqa: F401  (importing registers them)
from chains.routers.artifacts import SHIPPED_ARTIFACT, LiveArtifact, live, live_version, read_artifact
from chains.routers.base import ROUTER_CLS, Router
from core.errors import TandemError
from storage.db import Database

DEFAULT_ROUTER = "evidence"
RELOAD_CHECK_S = 2.0  # promotions reach every replica within this (target: 3 s)


def build_router(name: str, params: dict[str, Any]) -> Router:
    if name not in ROUTER_CLS:
        raise TandemError(f"unknown router '{name}'. Known: {', '.join(sorted(ROUTER_CLS))}. Fix: set TANDEM_ROUTER")
    return ROUTER_CLS[name](params)


class RouterSource:
    """This process's router, rebuilt within seconds when an operator promotes another one in any process that
    shares the database (no restart).

    Nothing here stops answers: an unknown router name, an unreadable store or a promoted router that does not
    build falls back to the shipped router, and ``problem`` says why (``/healthz`` and ``tandem doctor`` show it).
    """

    def __init__(self, db: Database, name: str = DEFAULT_ROUTER, check_s: float = RELOAD_CHECK_S,
                 clock: Callable[[], float] = time.monotonic):
        self.db, self.name, self.check_s, self._clock = db, name, check_s, clock
        self.problem = ""
        self.version = -1
        self._lock = threading.Lock()
        self._checked = -1e9
        self._router = self._load()

    def current(self) -> Router:
        now = self._clock()
        if now - self._checked >= self.check_s:
            with self._lock:
                if now - self._checked >= self.check_s:
                    self._checked = now
                    try:
                        changed = live_version(self.db) != self.version
                    except Exception:  # the database is away: keep routing with what we have
                        changed = False
                    if changed:
                        self._router = self._load()
        return self._router

    def _load(self) -> Router:
        problems = []
        name = self.name
        if name not in ROUTER_CLS:
            problems.append(f"unknown router '{name}' (TANDEM_ROUTER); using '{DEFAULT_ROUTER}'")
            name = DEFAULT_ROUTER
        try:
            artifact = live(self.db)
        except Exception as exc:
            problems.append(f"router store unreadable ({exc.__class__.__name__}); using the shipped router")
            artifact = LiveArtifact(self.version, read_artifact(SHIPPED_ARTIFACT), "shipped")
        self.version = artifact.version
        try:
            router = build_router(name, artifact.params)
        except Exception as exc:
            problems.append(f"promoted router v{artifact.version} is unusable ({exc.__class__.__name__}); using the "
                            "shipped router. Fix: `tandem router rollback`")
            router = build_router(name, read_artifact(SHIPPED_ARTIFACT))
        self.problem = "; ".join(problems)
        return router


def fixed_router(name: str | None = None, artifact: Path | None = None) -> Router:
    """A router that never reloads: for batch routing, evaluation and benchmarks."""
    return build_router(name or DEFAULT_ROUTER, read_artifact(artifact or SHIPPED_ARTIFACT))
