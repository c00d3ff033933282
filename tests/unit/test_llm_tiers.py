"""Tier selection by score band, tiers read live from the versioned settings table."""

from __future__ import annotations

import pytest

from chains.llm.tiers import TierProfile, configured_tiers, parse_tiers, select_tier
from tandem.errors import TandemError

THREE = [
    {"name": "expert", "base_url": "http://c/v1", "model": "big", "min_score": 0.9, "typical_latency_ms": 4000},
    {"name": "base", "base_url": "http://a/v1", "model": "small", "min_score": 0.0},
    {"name": "enhanced", "base_url": "http://b/v1", "model": "mid", "min_score": 0.7},
]


@pytest.mark.parametrize("score, expected", [(None, "base"), (0.0, "base"), (0.69, "base"), (0.7, "enhanced"),
                                             (0.89, "enhanced"), (0.9, "expert"), (1.0, "expert")])
def test_highest_min_score_not_above_the_score_wins(score, expected):
    assert select_tier(score, parse_tiers(THREE)).name == expected


def test_scores_below_every_band_get_the_lowest_tier():
    tiers = [TierProfile(name="only-high", base_url="http://x/v1", min_score=0.5),
             TierProfile(name="higher", base_url="http://y/v1", min_score=0.8)]
    assert select_tier(0.1, tiers).name == "only-high"


def test_empty_list_means_the_default_endpoint(monkeypatch):
    from tandem.settings import reset_settings

    monkeypatch.setenv("TANDEM_LLM_URL", "http://gpu-host:8000/v1")
    monkeypatch.setenv("TANDEM_LLM_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    reset_settings()
    try:
        (tier,) = parse_tiers([])
        assert (tier.name, tier.base_url, tier.effective_model) == ("default", "http://gpu-host:8000/v1",
                                                                   "Qwen/Qwen2.5-7B-Instruct")
    finally:
        monkeypatch.undo()
        reset_settings()


def test_default_model_is_the_served_smollm2_folder():
    from tandem.models import smollm2_folder

    assert parse_tiers([])[0].effective_model == str(smollm2_folder())


@pytest.mark.parametrize("bad, words", [([{"name": "x"}], "base_url"),
                                        ([{"name": "x", "base_url": "http://a/v1", "min_score": 2}], "min_score"),
                                        ([THREE[1], {**THREE[1]}], "unique")])
def test_invalid_tiers_are_one_clear_error(bad, words):
    with pytest.raises(TandemError, match=words):
        parse_tiers(bad)


def test_editing_settings_changes_tiers_without_restart(db):
    from storage.settings_store import current_thresholds, save

    before = current_thresholds().tiers
    try:
        save({"tiers": THREE}, author="test", reason="three tiers")
        assert [t.name for t in configured_tiers()] == ["base", "enhanced", "expert"]
        assert select_tier(0.95).model == "big"
        save({"tiers": [{"name": "broken"}]}, author="test", reason="typo")
        assert [t.name for t in configured_tiers()] == ["default"]  # answers keep flowing
        save({"tiers": []}, author="test", reason="back to one")
        assert [t.name for t in configured_tiers()] == ["default"]
    finally:
        save({"tiers": before}, author="test", reason="restore")
