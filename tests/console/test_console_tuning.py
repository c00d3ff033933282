"""Threshold changes through the Tuning and What-if pages reach the versioned settings store."""

from __future__ import annotations

from core.settings import get_settings
from storage import policy_store
from storage.db import open_database


def _db():
    return open_database(get_settings().db_url)


def _live():
    return policy_store.current(_db())


def _save_button(at):
    return next(b for b in at.button if b.label == "Save new version")


def test_tuning_save_is_versioned_read_back_and_rolled_back(signed_in):
    before = _live()
    at = signed_in.switch_page("views/tuning.py").run()
    at.number_input(key="tune_route_threshold").set_value(0.62)
    at.number_input(key="tune_cache_similarity").set_value(0.91)
    at.text_input(key="tune_reason").set_value("fewer LLM calls at peak")
    _save_button(at).click().run()
    assert not at.exception and not at.error
    live = _live()
    assert live.version == before.version + 1
    assert (live.route_threshold, live.cache_similarity) == (0.62, 0.91)
    assert live.rewrite_threshold == before.rewrite_threshold
    newest = policy_store.history(_db(), limit=1)[0]
    assert (newest.author, newest.reason) == ("alice", "fewer LLM calls at peak")
    assert any(f"Saved version {live.version}." == s.value for s in at.success)

    at.button(key=f"rollback_{before.version}").click().run()
    assert not at.exception
    restored = _live()
    assert restored.version == live.version + 1
    assert (restored.route_threshold, restored.cache_similarity) == (before.route_threshold, before.cache_similarity)
    assert policy_store.history(_db(), limit=1)[0].reason == f"rollback to version {before.version}"


def test_tuning_refuses_a_change_without_reason_or_with_bad_hysteresis(signed_in):
    before = _live()
    at = signed_in.switch_page("views/tuning.py").run()
    at.number_input(key="tune_route_threshold").set_value(0.7)
    _save_button(at).click().run()
    assert "Say why" in at.error[0].value
    at.number_input(key="tune_overload_exit").set_value(0.9)
    at.number_input(key="tune_overload_enter").set_value(0.6)
    at.text_input(key="tune_reason").set_value("try")
    _save_button(at).click().run()
    assert not at.exception
    assert "overload_exit must be below overload_enter" in at.error[0].value
    assert _live().version == before.version


def test_what_if_apply_saves_the_picked_tau(signed_in):
    before = _live()
    at = signed_in.switch_page("views/what_if.py").run()
    at.slider(key="whatif_target_share").set_value(0.2).run()
    suggested = float(next(m.value for m in at.metric if m.label == "Suggested τ"))
    at.button(key="whatif_apply").click().run()
    assert not at.exception
    live = _live()
    assert live.version == before.version + 1 and abs(live.route_threshold - suggested) < 1e-3
    assert policy_store.history(_db(), limit=1)[0].reason.startswith("what-if: target LLM share 20%")
