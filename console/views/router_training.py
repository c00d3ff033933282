"""Router: retrain the learned router from feedback-labelled requests plus the shipped data, then promote."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from console import ui
from storage import settings_store

st.title("Router")
frame = ui.requests_frame()
feedback = ui.feedback_frame()
rated = frame[frame["id"].isin(set(feedback["request_id"]))] if not feedback.empty else frame.iloc[0:0]
cols = st.columns(3)
cols[0].metric("Rated requests in range", f"{len(rated):,}")
cols[1].metric("👍 / 👎", f"{int((feedback['rating'] > 0).sum())} / {int((feedback['rating'] < 0).sum())}"
               if not feedback.empty else "0 / 0")
cols[2].metric("Live τ", f"{settings_store.current_thresholds().route_threshold:.2f}")

try:
    from chains.routers.training import promote, retrain_from_feedback
except ImportError as exc:
    st.info("Router retraining is not available in this build: `chains.routers.training` "
            f"(retrain_from_feedback, promote) is missing ({exc}).")
    st.stop()


def metrics_of(result: object) -> dict:
    if isinstance(result, tuple):  # (candidate path, metrics)
        return next((part for part in result if isinstance(part, dict)), {"result": str(result)})
    if isinstance(result, dict):
        return result.get("metrics", result)
    for name in ("metrics", "validation", "validation_metrics"):
        value = getattr(result, name, None)
        if isinstance(value, dict):
            return value
    return {"result": str(result)}


def flatten(metrics: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float, str, bool)):
            out[f"{prefix}{key}"] = value
    return out


if st.button("Retrain from feedback", type="primary", key="router_retrain"):
    log_lines: list[str] = []
    with st.spinner("training… (minutes on 2 cores)"):
        try:
            st.session_state["router_candidate"] = retrain_from_feedback(log=log_lines.append)
        except Exception as exc:  # a failed training run is reported, the console keeps working
            st.error(f"Retraining failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    if log_lines:
        with st.expander("Training log"):
            st.code("\n".join(map(str, log_lines)))

candidate = st.session_state.get("router_candidate")
if candidate is not None:
    st.subheader("Validation metrics of the candidate")
    metrics = metrics_of(candidate)
    flat = flatten(metrics)
    st.dataframe(pd.DataFrame({"metric": list(flat), "value": [str(v) for v in flat.values()]}), hide_index=True)
    if st.button("Promote to live", key="router_promote"):
        try:
            path = candidate[0] if isinstance(candidate, tuple) else None
            outcome = promote(path)
        except Exception as exc:
            st.error(f"Promotion failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        else:
            st.success(f"Promoted{': ' + str(outcome) if outcome else ''}. Operator: {ui.operator()}")
            st.session_state.pop("router_candidate", None)
