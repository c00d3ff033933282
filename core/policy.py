"""The live routing policy as a value: thresholds, LLM tiers and answer-check actions, each range-checked.

The storage layer keeps versions of it; the runtime reads the newest one; the console edits it. It lives on
the ground floor because all three use it and none of them owns it.

Process-wide: ``fitted_thresholds`` reads the shipped router artifact once; the file is part of the release and
never changes while a process runs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from core.settings import Settings

# The answer check's finding kinds and what an operator may have done about each (chains/check.py explains them).
CHECK_KINDS = ("url", "email", "phone", "amount", "percent", "duration", "order", "truncated", "repeated", "language",
               "empty", "prompt_echo")
CHECK_ACTIONS = ("remove", "draft", "handoff")
# Links and contact details are removed (a neutral phrase stands in); an invented price, rate or delay is worse
# than no answer, so the customer gets the help center's own answer instead.
DEFAULT_CHECK_ACTIONS = {"url": "remove", "email": "remove", "phone": "remove", "order": "remove", "amount": "draft",
                         "percent": "draft", "duration": "draft", "truncated": "remove", "repeated": "remove",
                         "language": "draft", "empty": "draft", "prompt_echo": "draft"}


# The shipped router's artifact, read as data (core imports nothing above it): its training chose the default
# route and rewrite thresholds on validation data, and they are read from it, never copied by hand.
SHIPPED_ROUTER_ARTIFACT = Path(__file__).resolve().parent.parent / "chains" / "artifacts" / "router.json"


@functools.cache
def fitted_thresholds(router: str) -> dict[str, float]:
    """``route_threshold`` and ``rewrite_threshold`` as the shipped artifact's section for ``router`` (or the
    evidence router's, which every artifact has) gives them."""
    artifact = json.loads(SHIPPED_ROUTER_ARTIFACT.read_text(encoding="utf-8"))
    section = artifact.get(router) if isinstance(artifact.get(router), dict) else None
    fitted = (section or {}).get("thresholds") or artifact["evidence"]["thresholds"]
    return {"route_threshold": float(fitted["route_threshold"]),
            "rewrite_threshold": float(fitted["rewrite_threshold"])}


DEFAULT_AUTOTUNE = {"enabled": False, "objective": "llm_share", "target": 0.3, "window_min": 30, "step": 0.05,
                    "min_requests": 100}
AUTOTUNE_OBJECTIVES = ("llm_share", "p95_ms", "cost_per_1k")


class Thresholds(BaseModel):
    """The operator-tunable values, each with its validated range."""

    route_threshold: float = Field(ge=0.0, le=1.0)
    rewrite_threshold: float = Field(ge=0.0, le=1.0)
    cache_similarity: float = Field(ge=0.5, le=1.0)
    overload_enter: float = Field(ge=0.05, le=1.0)
    overload_exit: float = Field(ge=0.0, le=1.0)
    # LLM tiers as data (name, base_url, model, cost_per_1k_tokens, max_context, typical_latency_ms,
    # min_score); empty means the single endpoint from TANDEM_LLM_URL. See chains/llm/endpoints.py.
    tiers: list[dict[str, Any]] = Field(default_factory=list)
    # Automatic tuning (ops/tuner.py): off until an operator switches it on and states an objective.
    autotune: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_AUTOTUNE))
    # What the answer check does with each kind of finding: remove | draft | handoff.
    check_actions: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_CHECK_ACTIONS))
    version: int = 0

    @field_validator("autotune")
    @classmethod
    def _autotune(cls, value: dict[str, Any]) -> dict[str, Any]:
        merged = {**DEFAULT_AUTOTUNE, **value}
        if merged["objective"] not in AUTOTUNE_OBJECTIVES:
            raise ValueError(f"autotune objective must be one of {', '.join(AUTOTUNE_OBJECTIVES)}")
        if not 0 < float(merged["step"]) <= 0.2 or int(merged["window_min"]) < 5 or float(merged["target"]) < 0:
            raise ValueError("autotune: step in (0, 0.2], window_min >= 5, target >= 0")
        return merged

    @field_validator("check_actions")
    @classmethod
    def _known_actions(cls, value: dict[str, str]) -> dict[str, str]:
        for kind, action in value.items():
            if kind not in CHECK_KINDS:
                raise ValueError(f"unknown check kind {kind!r}; known: {', '.join(CHECK_KINDS)}")
            if action not in CHECK_ACTIONS:
                raise ValueError(f"check action for {kind} must be one of {', '.join(CHECK_ACTIONS)}, got {action!r}")
        return {**DEFAULT_CHECK_ACTIONS, **value}

    @model_validator(mode="after")
    def _hysteresis(self) -> Thresholds:
        if self.overload_exit >= self.overload_enter:
            raise ValueError("overload_exit must be below overload_enter (hysteresis)")
        return self

    @classmethod
    def defaults(cls, settings: Settings) -> Thresholds:
        """The policy ``settings`` seed: their thresholds where set, else those the shipped router artifact's
        training chose."""
        s = settings
        fitted = fitted_thresholds(s.router)
        route = fitted["route_threshold"] if s.route_threshold is None else s.route_threshold
        rewrite = fitted["rewrite_threshold"] if s.rewrite_threshold is None else s.rewrite_threshold
        return cls(route_threshold=route, rewrite_threshold=rewrite,
                   cache_similarity=s.cache_similarity, overload_enter=s.overload_enter,
                   overload_exit=s.overload_exit)

    @classmethod
    def shipped(cls) -> Thresholds:
        """The policy as released, with no environment read: the settings' field defaults and the shipped artifact's
        thresholds. What a database with no saved version yet reads (the app seeds one from its settings first)."""
        return cls.defaults(Settings.model_construct())

    def values(self) -> dict[str, Any]:
        return self.model_dump(exclude={"version"})
