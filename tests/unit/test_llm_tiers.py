"""Tier selection by score band, tiers read live from the versioned policy."""

from __future__ import annotations

import pytest

from chains.llm.endpoints import TierProfile, parse_tiers, parse_tiers_or_default, select_tier
from core.errors import TandemError
from core.policy import Thresholds

THREE = [
    {"name": "expert", "base_url": "http://c/v1", "model": "big", "min_score": 0.9, "typical_latency_ms": 4000},
    {"name": "base", "base_url": "http://a/v1", "model": "small", "min_score": 0.0},
    {"name": "enhanced", "base_url": "http://b/v1", "model": "mid", "min_score": 0.7},
]


@pytest.mark.parametrize("score, expected", [(None, "base"), (0.0, "base"), (0.69, "base"), (0.7, "enhanced"),
                                             (0.89, "enhanced"), (0.9, "expert"), (1.0, "expert")])
def test_highest_min_score_not_above_the_score_wins(score, expected, settings):
    assert select_tier(score, parse_tiers(THREE, settings)).name == expected


def test_scores_below_every_band_get_the_lowest_tier():
    tiers = [TierProfile(name="only-high", base_url="http://x/v1", min_score=0.5),
             TierProfile(name="higher", base_url="http://y/v1", min_score=0.8)]
    assert select_tier(0.1, tiers).name == "only-high"


def test_empty_list_means_the_default_endpoint(settings):
    gpu = settings.model_copy(update={"llm_url": "http://gpu-host:8000/v1", "llm_model": "Qwen/Qwen2.5-7B-Instruct"})
    (tier,) = parse_tiers([], gpu)
    assert (tier.name, tier.base_url, tier.model) == ("default", "http://gpu-host:8000/v1", "Qwen/Qwen2.5-7B-Instruct")
    # a local stand-in: the client sends its registry name, the name `tandem llm-server` serves it under
    assert parse_tiers([], settings)[0].model == settings.llm_model == "smollm2"
    # no model configured: the client asks the endpoint what it serves
    assert parse_tiers([], settings.model_copy(update={"llm_model": ""}))[0].model == ""


@pytest.mark.parametrize("bad, words", [([{"name": "x"}], "base_url"),
                                        ([{"name": "x", "base_url": "http://a/v1", "min_score": 2}], "min_score"),
                                        ([THREE[1], {**THREE[1]}], "unique")])
def test_invalid_tiers_are_one_clear_error(bad, words, settings):
    with pytest.raises(TandemError, match=words):
        parse_tiers(bad, settings)


def test_editing_the_policy_changes_the_clients_tiers_without_restart(db, settings):
    from chains.llm.client import LLMClient
    from chains.policy import LivePolicy
    from storage import policy_store

    policy = LivePolicy(db, Thresholds.defaults(settings))
    client = LLMClient(settings, policy.current, poll_metrics=False)
    before = policy.current().tiers
    try:
        policy.save({"tiers": THREE}, author="test", reason="three tiers")
        assert [t["name"] for t in client.status()["tiers"]] == ["base", "enhanced", "expert"]
        assert select_tier(0.95, parse_tiers_or_default(policy.current().tiers, settings)).model == "big"
        policy_store.save(db, {"tiers": [{"name": "broken"}]}, author="test", reason="typo")
        policy.invalidate()
        assert [t["name"] for t in client.status()["tiers"]] == ["default"]  # answers keep flowing
    finally:
        policy.save({"tiers": before}, author="test", reason="restore")
