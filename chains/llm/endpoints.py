"""LLM tiers as configuration: which endpoint and model answers a message of a given difficulty.

The tier list lives in the versioned policy (``policy.current().tiers``), so an operator edits it like any
threshold and the running app follows within seconds, no restart. Each dict has the fields of
:class:`TierProfile`; ``min_score`` is the lower edge of the router-score band the tier serves, and
:func:`select_tier` picks the tier with the highest ``min_score <= score``. Example (three vLLM hosts)::

    from storage import policy_store
    policy_store.save(db, {"tiers": [
        {"name": "base", "base_url": "http://gpu-a:8000/v1", "model": "Qwen/Qwen2.5-1.5B-Instruct",
         "cost_per_1k_tokens": 0.0004, "max_context": 8192, "typical_latency_ms": 600, "min_score": 0.0},
        {"name": "enhanced", "base_url": "http://gpu-b:8000/v1", "model": "Qwen/Qwen2.5-7B-Instruct",
         "cost_per_1k_tokens": 0.002, "max_context": 16384, "typical_latency_ms": 1500, "min_score": 0.7},
        {"name": "expert", "base_url": "http://gpu-c:8000/v1", "model": "Qwen/Qwen2.5-32B-Instruct",
         "cost_per_1k_tokens": 0.008, "max_context": 32768, "typical_latency_ms": 4000, "min_score": 0.9},
    ]}, author="ops", reason="three tiers")

A score of 0.75 goes to "enhanced", 0.95 to "expert", anything below 0.7 (or no score) to "base".
An empty list means one tier, "default", built from ``TANDEM_LLM_URL`` / ``TANDEM_LLM_MODEL``.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field, ValidationError

from core.errors import TandemError
from core.settings import Settings

log = logging.getLogger(__name__)

# SmolLM2 under vLLM on 2 idle CPU cores: a full answer (llm_max_tokens=96 at ~30 tok/s) takes about 3 s; a
# slower mean means the server is busy (see load.py: twice this is load 0.5, three times is load 1).
DEFAULT_TYPICAL_LATENCY_MS = 4000.0


class TierProfile(BaseModel):
    name: str = Field(min_length=1)
    base_url: str = Field(min_length=1, description="OpenAI-compatible endpoint, ending in /v1.")
    model: str = Field("", description="Model name sent to the endpoint; empty means the first one it serves.")
    cost_per_1k_tokens: float = Field(0.0, ge=0)
    max_context: int = Field(2048, ge=1)
    typical_latency_ms: float = Field(DEFAULT_TYPICAL_LATENCY_MS, gt=0)
    min_score: float = Field(0.0, ge=0, le=1)



def default_tier(settings: Settings) -> TierProfile:
    return TierProfile(name="default", base_url=settings.llm_url, model=settings.llm_model,
                       cost_per_1k_tokens=settings.llm_price_per_1k_tokens, min_score=0.0)


def parse_tiers(raw: list[dict], settings: Settings) -> list[TierProfile]:
    """Validate tier dicts, sorted by min_score; a bad entry is one clear error naming it."""
    if not raw:
        return [default_tier(settings)]
    tiers = []
    for index, item in enumerate(raw):
        try:
            tiers.append(TierProfile(**item))
        except (ValidationError, TypeError) as exc:
            name = item.get("name", f"#{index}") if isinstance(item, dict) else f"#{index}"
            raise TandemError(f"LLM tier {name} is invalid: {_first_error(exc)}") from None
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise TandemError(f"LLM tier names must be unique, got {names}")
    return sorted(tiers, key=lambda t: t.min_score)


def parse_tiers_or_default(raw: list[dict], settings: Settings) -> list[TierProfile]:
    """The live tier list. A broken saved list must not stop answers: it is logged and the default endpoint is
    used. Editors (the console) call :func:`parse_tiers` before saving to show the error to the operator."""
    try:
        return parse_tiers(list(raw or []), settings)
    except TandemError as exc:
        log.error("ignoring the saved LLM tiers: %s", exc)
        return [default_tier(settings)]


def select_tier(score: float | None, tiers: list[TierProfile]) -> TierProfile:
    """The tier whose band holds ``score``: highest ``min_score <= score``; no score means the lowest tier."""
    tiers = sorted(tiers, key=lambda t: t.min_score)
    if score is None:
        return tiers[0]
    chosen = tiers[0]
    for tier in tiers:
        if tier.min_score <= score:
            chosen = tier
    return chosen


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
    return str(exc)
