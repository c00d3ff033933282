"""The router contract and its registry (compare RouteLLM's `Router` and `ROUTER_CLS`).

A router answers one question: the calibrated probability that this message needs the LLM tier.
A threshold tau on that probability then means what it says.
"""

from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


@dataclass
class RouteContext:
    """What the chain already knows when it asks for a score: computed once, shared by every router."""

    vector: np.ndarray | None = None
    hits: Sequence[Any] = ()
    history: Sequence[str] = ()
    # Distance evidence from the knowledge base (knowledge.index.HybridIndex.evidence_of), when it gave some.
    evidence: dict[str, float] = field(default_factory=dict)

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
    """Scores one message; built from the parameters a training run saved (the artifact)."""

    name: ClassVar[str]

    def __init__(self, params: dict[str, Any]):
        self.params = params
        # The same parameters give the same fingerprint in every replica: cached answers are keyed by it, so a
        # promotion or rollback retires answers the previous router decided.
        self.fingerprint = hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:8]

    @abstractmethod
    def score(self, query: str, context: RouteContext) -> float:
        """Calibrated probability in [0, 1] that the LLM tier is needed."""

    def fitted_thresholds(self) -> dict[str, float]:
        """The thresholds its training chose on validation data (``route_threshold``, ``rewrite_threshold``), read
        from its artifact; empty when it has none."""
        section = self.params.get(self.name, self.params)
        return dict(section.get("thresholds") or {}) if isinstance(section, dict) else {}

    def draft_quality(self, context: RouteContext, coverage: float) -> float | None:
        """Probability that the knowledge base's top answer is the right one, if this router learned it."""
        return None


ROUTER_CLS: dict[str, type[Router]] = {}


def register(cls: type[Router]) -> type[Router]:
    ROUTER_CLS[cls.name] = cls
    return cls


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 40.0), -40.0)))
