"""The router contract and its registry (compare RouteLLM's `Router` and `ROUTER_CLS`).

A router answers one question: the calibrated probability that this message needs the LLM tier.
A threshold tau on that probability then means what it says.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from tandem.settings import get_settings

SHIPPED_ARTIFACT = Path(__file__).resolve().parent.parent / "artifacts" / "router.json"


@dataclass
class RouteContext:
    """What the chain already knows when it asks for a score: computed once, shared by every router."""

    vector: np.ndarray | None = None
    hits: Sequence[Any] = ()
    history: Sequence[str] = ()

    @property
    def kb_top(self) -> float:
        return float(self.hits[0].score) if self.hits else 0.0

    @property
    def kb_margin(self) -> float:
        if not self.hits:
            return 0.0
        second = float(self.hits[1].score) if len(self.hits) > 1 else 0.0
        return float(self.hits[0].score) - second


class Router(ABC):
    name: ClassVar[str]

    def __init__(self, params: dict[str, Any]):
        self.params = params

    @abstractmethod
    def score(self, query: str, context: RouteContext) -> float:
        """Calibrated probability in [0, 1] that the LLM tier is needed."""


ROUTER_CLS: dict[str, type[Router]] = {}


def register(cls: type[Router]) -> type[Router]:
    ROUTER_CLS[cls.name] = cls
    return cls


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 40.0), -40.0)))


def active_artifact_path() -> Path:
    """A router promoted from the console lives under TANDEM_HOME and wins over the shipped one."""
    promoted = get_settings().home / "router" / "router.json"
    return promoted if promoted.is_file() else SHIPPED_ARTIFACT


@lru_cache(maxsize=4)
def load_artifact(path: str) -> dict[str, Any]:
    file = Path(path)
    return json.loads(file.read_text()) if file.is_file() else {}


def get_router(name: str | None = None, artifact: Path | None = None) -> Router:
    from chains.routers import learned, similarity, combined  # noqa: F401  (registers the classes)

    name = name or get_settings().router
    if name not in ROUTER_CLS:
        raise KeyError(f"unknown router '{name}'. Known: {', '.join(sorted(ROUTER_CLS))}")
    return ROUTER_CLS[name](load_artifact(str(artifact or active_artifact_path())))


def reload_routers() -> None:
    load_artifact.cache_clear()
