"""Routers: one contract (`score(query, context) -> p_llm`), a registry by name, and the live router source."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chains.routers import combined, learned, similarity  # noqa: F401  (importing registers the classes)
from chains.routers.artifacts import SHIPPED_ARTIFACT, active_path, read_artifact
from chains.routers.base import ROUTER_CLS, Router
from core.errors import TandemError

DEFAULT_ROUTER = "combined"
RELOAD_CHECK_S = 5.0


def build_router(name: str, params: dict[str, Any]) -> Router:
    if name not in ROUTER_CLS:
        raise TandemError(f"unknown router '{name}'. Known: {', '.join(sorted(ROUTER_CLS))}. Fix: set TANDEM_ROUTER")
    return ROUTER_CLS[name](params)


class RouterSource:
    """This process's router, rebuilt within seconds when an operator promotes another artifact (no restart).

    Nothing here stops answers: an unknown router name or a broken artifact falls back to the shipped
    ``combined`` router, and ``problem`` says why (``/healthz`` and ``tandem doctor`` show it).
    """

    def __init__(self, home: Path, name: str = DEFAULT_ROUTER, check_s: float = RELOAD_CHECK_S,
                 clock: Callable[[], float] = time.monotonic):
        self.home, self.name, self.check_s, self._clock = home, name, check_s, clock
        self.problem = ""
        self._lock = threading.Lock()
        self._stamp: tuple[str, float] = ("", -1.0)
        self._checked = -1e9
        self._router = self._load()

    def current(self) -> Router:
        now = self._clock()
        if now - self._checked >= self.check_s:
            with self._lock:
                if now - self._checked >= self.check_s:
                    self._checked = now
                    if self._file_stamp() != self._stamp:
                        self._router = self._load()
        return self._router

    def _file_stamp(self) -> tuple[str, float]:
        path = active_path(self.home)
        try:
            return str(path), path.stat().st_mtime
        except OSError:
            return str(path), -1.0

    def _load(self) -> Router:
        self._stamp = self._file_stamp()
        problems = []
        name = self.name
        if name not in ROUTER_CLS:
            problems.append(f"unknown router '{name}' (TANDEM_ROUTER); using '{DEFAULT_ROUTER}'")
            name = DEFAULT_ROUTER
        try:
            params = read_artifact(Path(self._stamp[0]))
        except TandemError as exc:
            problems.append(f"{exc}; using the shipped router")
            params = read_artifact(SHIPPED_ARTIFACT)
        self.problem = "; ".join(problems)
        return build_router(name, params)


def fixed_router(name: str | None = None, artifact: Path | None = None) -> Router:
    """A router that never reloads: for batch routing, evaluation and benchmarks."""
    return build_router(name or DEFAULT_ROUTER, read_artifact(artifact or SHIPPED_ARTIFACT))
