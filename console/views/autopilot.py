"""Autopilot: switch automatic τ tuning on or off, state its objective, and read what it did, why, and how to
undo it."""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from console import ui
from core.policy import AUTOTUNE_OBJECTIVES
from core.settings import get_settings
from ops import tuner
from ops.job import run_once
from storage import policy_store

settings = get_settings()
st.title("Autopilot")
st.caption("Each window the tuner replays the window's logged traffic at nearby thresholds and moves τ and the "
           "rewrite threshold at most one step toward the objective. It changes nothing while an alert is open, "
           "with too little traffic, or when the labelled replay accuracy would drop; one window after a change it "
           "keeps it only if neither the objective nor the quality guard (negative feedback, labelled accuracy) "
           "got worse, else it rolls back and raises an alert.")
FLASH_KEY = "autopilot_flash"
if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))

current = policy_store.current(ui.db())
config = current.autotune
with st.form("autotune"):
    enabled = st.toggle("Automatic tuning", value=bool(config["enabled"]), key="autotune_enabled")
    cols = st.columns(5)
    objective = cols[0].selectbox("Objective", AUTOTUNE_OBJECTIVES, format_func=lambda o: tuner.OBJECTIVES[o],
                                  index=AUTOTUNE_OBJECTIVES.index(config["objective"]), key="autotune_objective")
    target = cols[1].number_input("at most", min_value=0.0, value=float(config["target"]), key="autotune_target",
                                  help="LLM share as a fraction (0.3 = 30 %), p95 in ms, or USD per 1,000 requests.")
    step = cols[2].number_input("Step limit", min_value=0.01, max_value=0.2, value=float(config["step"]),
                                step=0.01, key="autotune_step")
    window = cols[3].number_input("Window (minutes)", min_value=5, value=int(config["window_min"]),
                                  key="autotune_window")
    minimum = cols[4].number_input("Min. requests", min_value=10, value=int(config["min_requests"]),
                                   key="autotune_min")
    submitted = st.form_submit_button("Save", type="primary")
if submitted:
    values = {"enabled": enabled, "objective": objective, "target": target, "step": step,
              "window_min": int(window), "min_requests": int(minimum)}
    try:
        saved = policy_store.save(ui.db(), {"autotune": values}, author=ui.operator(),
                                  reason=f"autopilot {'on' if enabled else 'off'}: {tuner.OBJECTIVES[objective]} "
                                         f"≤ {target:g}")
    except (ValidationError, ValueError) as exc:
        st.error(f"Not saved: {exc}")
    else:
        st.session_state[FLASH_KEY] = f"Saved as version {saved.version}."
        st.rerun()

if st.button("Tune now", disabled=not config["enabled"],
             help="Take a tuner step over the last window now instead of waiting for the schedule."):
    report = run_once(ui.db(), webhook=settings.alert_webhook, price_per_1k_tokens=settings.llm_price_per_1k_tokens,
                      force_tuner=True, keep_lease=False)
    event = report.tuner_event
    st.session_state[FLASH_KEY] = report.note if not report.ran else (
        f"{event.kind}: {event.message}" if event is not None else "Nothing to do.")
    st.rerun()

st.subheader("What it did")
events = tuner.events(ui.db(), 50)
if not events:
    st.caption("No automatic action yet.")
for event in events:
    with st.container(border=True):
        st.markdown(f"**{event.kind}** · {event.created_at:%Y-%m-%d %H:%M} UTC")
        st.write(event.message)
        detail = event.detail or {}
        before = detail.get("before")
        if before:
            st.markdown(f"*Saw*: {before.get('routed', 0)} routed requests, LLM share {before['llm_share']:.1%}, "
                        f"modelled p95 {before['p95_ms']:,.0f} ms, cost ${before['cost_per_1k']:.3f} per 1,000, "
                        f"negative feedback {before['negative_feedback_rate']:.1%}.")
        if event.kind == "applied":
            previous = detail["previous"]
            st.markdown(f"*Changed*: version {detail['previous_version']} → {detail['version']}: τ "
                        f"{previous['route_threshold']} → {detail['tau']}, rewrite threshold "
                        f"{previous['rewrite_threshold']} → {detail['rewrite']}.")
            st.markdown(f"*Undo*: roll back to version {detail['previous_version']} (below, or on the Tuning page).")
            if st.button(f"Undo: restore version {detail['previous_version']}", key=f"undo_{event.id}"):
                # The two thresholds the tuner changed, not the whole old version: an operator who switched the
                # autopilot off since must not find it switched on again by an undo.
                restored = policy_store.save(ui.db(), previous, ui.operator(),
                                             f"undo automatic change: thresholds of version {detail['previous_version']}")
                st.session_state[FLASH_KEY] = (f"The thresholds of version {detail['previous_version']} are live again "
                                               f"as version {restored.version}.")
                st.rerun()
