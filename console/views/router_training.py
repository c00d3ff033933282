"""Router: retrain the learned router from feedback-labelled requests plus the shipped data, then promote."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from chains.routers.artifacts import history, live, rollback
from console import ui
from core.errors import TandemError
from core.settings import get_settings
from offline.router_feedback import promote_if_not_worse, retrain_from_feedback
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
            version = promote_if_not_worse(ui.db(), path, ui.operator())
        except Exception as exc:
            st.error(f"Promotion failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        else:
            st.success(f"Promoted as router v{version}: every app replica switches within seconds.")
            st.session_state.pop("router_candidate", None)

st.subheader("Live router")
current = live(ui.db())
st.write(f"v{current.version}: {current.source} (trained {current.params.get('trained', '?')})")
if st.button("Roll back to the previous router", key="router_rollback", disabled=current.version == 0):
    try:
        restored = rollback(ui.db(), ui.operator())
    except TandemError as exc:
        st.error(str(exc))
    else:
        st.success(f"Live router: v{restored.version} ({restored.source})")
rows = history(ui.db())
if rows:
    st.dataframe(pd.DataFrame([{"version": r.id, "promoted": r.created_at, "by": r.author, "note": r.note,
                                "retired": r.retired_at if r.retired else None, "retired by": r.retired_by}
                               for r in rows]), hide_index=True)
