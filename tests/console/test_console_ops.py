"""The console's Alerts and Autopilot pages over the session's real traffic: an alert is shown on the Overview
and acknowledged on its page; an automatic change is explained (what it saw, what it changed, how to undo it) and
undone from the page."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ops import alerts, tuner
from ops.job import window_frame
from storage import policy_store
from storage.tables import utcnow


def _texts(at) -> str:
    return "\n".join(str(getattr(e, "value", "")) for e in [*at.markdown, *at.error, *at.caption, *at.success])


def test_an_open_alert_shows_on_the_overview_and_is_acknowledged_on_the_alerts_page(signed_in, db):
    alert = alerts.raise_alert(db, "fallback_rate", "fallback_rate rose to 0.4 (usual 0 ± 0.03; CUSUM 9.1)", utcnow())
    try:
        overview = signed_in.switch_page("views/overview.py").run()
        assert any("open alert" in e.value and "fallback_rate rose" in e.value for e in overview.error)
        page = overview.switch_page("views/alerts.py").run()
        assert not page.exception and "fallback_rate rose" in _texts(page)
        page.button(key=f"ack_{alert.id}").click().run()
        assert not page.exception
        stored = next(a for a in alerts.open_alerts(db) if a.id == alert.id)
        assert stored.state == "acknowledged" and stored.acknowledged_by == "alice"
    finally:
        alerts.acknowledge(db, int(alert.id or 0), "test")
        with db.session() as session:
            row = session.get(type(alert), alert.id)
            row.state = "resolved"
            session.add(row)
            session.commit()


def _one_step_short_of_an_llm_answer(db, frame, config: dict) -> dict:
    """Thresholds just short of one of the session's LLM answers (τ a little below its p_llm, the rewrite threshold a
    little above its draft quality), so that one step moves it to the small tier and the tuner has a change to make.
    The lowest such answer is taken whose step keeps the labelled replay accuracy: a step that would put a
    thumbs-down answer back on the small tier is rightly refused by the tuner's guard (tests/ops cover that), and
    which answers the session's traffic puts where depends on the router."""
    current = policy_store.current(db)
    llm_rows = frame[(frame["route"] == "llm") & frame["p_llm"].notna()].sort_values("p_llm")
    for _, row in llm_rows.iterrows():
        start = {"route_threshold": round(max(0.0, float(row["p_llm"]) - 0.05), 4),
                 "rewrite_threshold": round(min(1.0, float(row["draft_quality"]) + 0.05), 4)}
        tau, rewrite, before, after = tuner.propose(frame, current.model_copy(update=start), config, 0.002)
        moves = (tau, rewrite) != (start["route_threshold"], start["rewrite_threshold"])
        if moves and (before.labelled_accuracy is None or after.labelled_accuracy is None
                      or after.labelled_accuracy >= before.labelled_accuracy - 0.01):
            return start
    pytest.fail("no logged LLM answer gives the tuner a change it may apply")


def test_an_automatic_change_is_explained_and_undone_from_the_autopilot_page(signed_in, db):
    frame = window_frame(db, utcnow() - timedelta(days=1))
    config = {**policy_store.current(db).autotune, "enabled": True, "objective": "llm_share", "target": 0.0,
              "min_requests": 10, "step": 0.2}
    start = policy_store.save(db, _one_step_short_of_an_llm_answer(db, frame, config), "test",
                              "start one step short of a logged LLM answer")
    before = policy_store.current(db)
    assert before.version == start.version
    event = tuner.tune(db, frame, utcnow(), config, alerts_open=False, price_per_1k=0.002)
    assert event.kind == "applied", event.message
    page = signed_in.switch_page("views/autopilot.py").run()
    assert not page.exception
    text = _texts(page)
    assert "*Saw*" in text and "*Changed*" in text and f"roll back to version {before.version}" in text
    page.button(key=f"undo_{event.id}").click().run()
    assert not page.exception
    restored = policy_store.current(db)
    assert restored.route_threshold == before.route_threshold and restored.version > event.detail["version"]
    history = policy_store.history(db, limit=3)
    assert history[0].reason == f"undo automatic change: thresholds of version {before.version}"
    assert history[1].author == tuner.AUTHOR
    # A window later the tuner does not judge (and so cannot roll back) the change the operator already undid.
    judged = tuner.tune(db, frame, utcnow() + timedelta(minutes=int(config["window_min"]) + 1), config,
                        alerts_open=False, price_per_1k=0.002)
    assert judged.kind == "superseded", judged.message
    assert policy_store.current(db).version == restored.version
