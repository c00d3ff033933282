"""The live routing policy as a value: thresholds, LLM tiers and answer-check actions, each range-checked.

The storage layer keeps versions of it; the runtime reads the newest one; the console edits it. It lives on
the ground floor because all three use it and none of them owns it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from core.settings import Settings, get_settings


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

    @model_validator(mode="after")
    def _hysteresis(self) -> Thresholds:
        if self.overload_exit >= self.overload_enter:
            raise ValueError("overload_exit must be below overload_enter (hysteresis)")
        return self

    @classmethod
    def defaults(cls, settings: Settings | None = None) -> Thresholds:
        s = settings or get_settings()
        return cls(route_threshold=s.route_threshold, rewrite_threshold=s.rewrite_threshold,
                   cache_similarity=s.cache_similarity, overload_enter=s.overload_enter,
                   overload_exit=s.overload_exit)

    def values(self) -> dict[str, Any]:
        return self.model_dump(exclude={"version"})
