"""The tier contract (chains/tiers): tiers are plug-ins in one registry, and the chain serves a plan by the registered
tier that names it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chains.schema import ChatRequest
from chains.tiers import TIERS, Tier, TierParts, cacheable, register
from chains.turn import Turn
from core.policy import Thresholds
from core.settings import get_settings


def test_the_built_in_tiers_are_registered_with_their_plans_and_cache_rules():
    assert {"small", "llm", "tool", "handoff", "answered"} <= set(TIERS)
    assert TIERS["tool"].plans == ("tool",) and TIERS["handoff"].plans == ("handoff",)
    assert TIERS["tool"].ruled_only and TIERS["handoff"].ruled_only and not TIERS["small"].ruled_only
    assert TIERS["small"].plans == ("small",) and TIERS["llm"].plans == ("llm", "rewrite")
    assert cacheable("small") and cacheable("llm")
    assert not cacheable("answered") and not cacheable("guard") and not cacheable("tool") and not cacheable("cache")
    assert not cacheable("handoff")


def test_the_route_names_code_reads_are_the_routes_a_response_can_carry_and_name_the_answering_tiers():
    from typing import get_args

    from chains.schema import Route
    from chains.tiers.base import LLM_ROUTE, ROUTES, SMALL_ROUTE

    assert get_args(Route) == ROUTES
    assert TIERS[SMALL_ROUTE].name == SMALL_ROUTE and TIERS[LLM_ROUTE].name == LLM_ROUTE


def test_a_second_tier_under_a_taken_name_is_refused():
    class Impostor(Tier):
        name = "small"

        def answer(self, turn: Turn) -> Iterator:
            yield turn

    with pytest.raises(ValueError, match="already registered"):
        register(Impostor)
    assert TIERS["small"].__name__ == "SmallTier"


def test_a_tier_added_in_one_class_is_built_with_the_chains_parts_and_chosen_to_answer_its_plan():
    """The chain builds a registered tier with its parts, selects it for its plan, and the tier it built answers the
    turn. (Streaming through the chain also needs the tier's name among chains.schema.Route: Decided and ChatResponse
    carry it, and a test's tier cannot add one; the built-in tiers are served through the chain in the integration
    tests.)"""
    from chains.answers import Brand
    from chains.router_chain import RouterChain

    @register
    class Expert(Tier):
        name = "expert"
        plans = ("expert",)

        def answer(self, turn: Turn) -> Iterator:
            yield turn.finish("llm", f"{self.parts.brand.shop}'s expert says: a fast wide lens.", "tier: expert")

    try:
        chain = RouterChain(kb=object(), router=lambda: None, cache=None, rules=None, llm=None,  # type: ignore[arg-type]
                            db=None, embed=lambda text: None, brand=Brand("Lens Loft", "help@lensloft.example"))
        assert chain.tier_of_plan["expert"] == "expert" and isinstance(chain.tiers["expert"], Expert)
        assert isinstance(chain.tiers["expert"].parts, TierParts)
        turn = Turn(request=ChatRequest(message="which lens for night skies?"), thresholds=Thresholds.defaults(get_settings()))
        turn.plan = "expert"  # what the threshold stage sets (a tier's claims() hook can set it too)
        assert chain._select_tier(turn) is chain.tier_runnables["expert"]
        served = list(chain.tiers[chain.tier_of_plan[turn.plan]].answer(turn))
    finally:
        TIERS.pop("expert", None)
    assert served == [turn] and turn.done and turn.answer == "Lens Loft's expert says: a fast wide lens."
    assert turn.reasons[-1] == "tier: expert"
