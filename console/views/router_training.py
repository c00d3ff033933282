"""Router: retrain the learned router from feedback-labelled requests plus the shipped data, then promote."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from chains.routers.artifacts import promote, rollback
from console import ui
from core.settings import get_settings
from offline.router_training import retrain_from_feedback
from storage import policy_store

st.title("Router")
frame = ui.requests_frame()
feedback = ui.feedback_frame()
rated = frame[frame["id"].isin(set(feedback["request_id"]))] if not feedback.empty else frame.iloc[0:0]
cols = st.columns(3)
cols[0].metric("Rated requests in range", f"{len(rated):,}")
cols[1].metric("👍 / 👎", f"{int((feedback['rating'] > 0).sum())} / {int((feedback['rating'] < 0).sum())}"
               if not feedback.empty else "0 / 0")
cols[2].metric("Live τ", f"{policy_store.current(ui.db()).route_threshold:.2f}")


def flatten(metrics: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float, str, bool)):
            out[f"{prefix}{key}"] = value
    return out


home = get_settings().home
if st.button("Retrain from feedback", type="primary", key="router_retrain"):
    log_lines: list[str] = []
    with st.spinner("training… (minutes on 2 cores)"):
        try:
            st.session_state["router_candidate"] = retrain_from_feedback(ui.db(), home, log=log_lines.append)
        except Exception as exc:  # a failed training run is reported, the console keeps working
            st.error(f"Retraining failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    if log_lines:
        with st.expander("Training log"):
            st.code("\n".join(map(str, log_lines)))

candidate = st.session_state.get("router_candidate")
if candidate is not None:
    path, metrics = candidate
    st.subheader("Validation metrics of the candidate")
    flat = flatten(metrics)
    st.dataframe(pd.DataFrame({"metric": list(flat), "value": [str(v) for v in flat.values()]}), hide_index=True)
    if st.button("Promote to live", key="router_promote"):
        try:
            live = promote(home, path)
        except Exception as exc:
            st.error(f"Promotion failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        else:
            st.success(f"Promoted: {live}. Every app on this data directory switches within seconds. "
                       f"Operator: {ui.operator()}")
            st.session_state.pop("router_candidate", None)

if st.button("Roll back to the previous router", key="router_rollback"):
    st.success(f"Live router: {rollback(home)}")
