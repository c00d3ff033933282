"""The tier contract and its registry: what answers a turn once the route is decided.

A tier has a name (the route its answers carry), says whether its answers may be cached, names the plans of the
threshold stage it serves, and produces the answer's events for one turn: text pieces, a :class:`Revised` that
replaces what was shown, and the finished :class:`Turn` last. The chain yields the turn's decision before them.
Adding a tier is one file: a subclass with ``@register``, imported by ``chains/tiers/__init__.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from chains.answers import DEFAULT_BRAND, Brand
from chains.schema import (  # noqa: F401  (the route names: re-exported for code above the chain)
    CACHE_ROUTE,
    CATALOG_ROUTE,
    GUARD_ROUTE,
    HANDOFF_ROUTE,
    LLM_ROUTE,
    ROUTES,
    SMALL_ROUTE,
    TOOL_ROUTE,
    Revised,
)
from chains.turn import Turn


@dataclass(frozen=True)
class TierParts:
    """What tiers may use of the chain's parts (given by the chain; a tier never reaches back into it)."""

    llm: Any = None                                 # chains.llm.base.LLM, or None without an LLM tier
    hold_until_checked: bool = False                # LLM answers shown only once checked whole
    stop_when_broken: bool = True                   # stop generating an answer whose finished sentences fail
    router: Callable[[], Any] = lambda: None        # the current router (a turn carries its own snapshot)
    kb: Any = None                                  # knowledge.base.KnowledgeBase: answers looked up by id
    brand: Brand = DEFAULT_BRAND                    # who the answers speak for (TANDEM_SHOP_NAME, ...)
    db: Any = None                                  # storage.db.Database the tools read (None: tools are not run)
    catalog: Any = None                             # catalog.live.LiveCatalog (None: no catalog step)
    # by language: the best two help-center answers closer than this, ask which is meant (absent or 0: never)
    clarify_margins: Mapping[str, float] = field(default_factory=dict)


class Tier(ABC):
    name: ClassVar[str]
    cacheable: ClassVar[bool] = False
    plans: ClassVar[tuple[str, ...]] = ()  # the threshold stage's plans this tier serves
    # A rule that names this tier settles the route at the rules stage: no retrieval, score or threshold (a tool
    # reads its own data; a handoff needs no answer from the KB).
    ruled_only: ClassVar[bool] = False

    def __init__(self, parts: TierParts):
        self.parts = parts

    def claims(self, turn: Turn) -> tuple[str, str] | None:
        """After the threshold stage: (plan, reason) to take the turn over from the plan it chose, else None. The
        tier may set what the plan's tier will read (hits, draft). The first registered claim wins."""
        return None

    @abstractmethod
    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        """The answer's text pieces (and a Revised that replaces them), then the finished turn."""


TIERS: dict[str, type[Tier]] = {}


def register(tier: type[Tier]) -> type[Tier]:
    """Add a tier class to the registry under its name (a second one of the same name is a mistake)."""
    if tier.name in TIERS and TIERS[tier.name] is not tier:
        raise ValueError(f"a tier named {tier.name!r} is already registered ({TIERS[tier.name].__name__})")
    TIERS[tier.name] = tier
    return tier


def cacheable(route: str) -> bool:
    """Whether answers of the tier named ``route`` may be cached (guard and cache answers never are)."""
    tier = TIERS.get(route)
    return bool(tier is not None and tier.cacheable)
