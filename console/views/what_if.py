"""What-if replay: sweep the route threshold over logged or uploaded traffic; pick and apply a tau."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from console import ui
from core.settings import get_settings
from ops import replay
from storage import policy_store

settings = get_settings()
st.title("What-if replay")
source = st.radio("Traffic", ["Logged requests", "Uploaded labelled CSV"], horizontal=True, key="whatif_source")

measured: replay.LatencyModel | None = None
tokens_default = float("nan")
if source == "Logged requests":
    frame = ui.requests_frame()
    replay_data = replay.data_from_log(frame, ui.feedback_frame())
    st.caption(f"{replay_data.p_llm.size:,} requests in {ui.time_range()} reached the router (have p_llm); "
               f"{int(replay_data.labelled.sum())} carry a small-tier rating from feedback.")
    if replay_data.p_llm.size:
        measured = replay.latency_model_from_log(frame)
        tokens_default = replay.mean_llm_tokens(frame)
else:
    st.caption("Columns: `p_llm` (required); `correct_small` or `label_llm_needed` (0/1); `correct_llm` (0/1); "
               "`latency_sched_ms`, `latency_small_ms`, `latency_llm_ms` (per row, optional).")
    upload = st.file_uploader("Labelled CSV", type=["csv"], key="whatif_csv")
    if upload is None:
        st.stop()
    if upload.size > settings.max_upload_mb * 1024 * 1024:
        st.error(f"The file is {upload.size / 1e6:.1f} MB; the limit is {settings.max_upload_mb} MB.")
        st.stop()
    try:
        replay_data, measured = replay.data_from_csv(pd.read_csv(upload))
    except (replay.ReplayInputError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        st.error(f"Cannot replay this file: {str(exc).splitlines()[0]}")
        st.stop()
    st.caption(f"{replay_data.p_llm.size:,} rows, {int(replay_data.labelled.sum())} labelled.")

if replay_data.p_llm.size == 0:
    st.info("No traffic with a router score (p_llm) in this time range: nothing to replay yet.")
    st.stop()


def _or(value: float | None, default: float) -> float:
    return default if value is None or math.isnan(value) else float(value)


with st.expander("Latency and cost model", expanded=False):
    st.caption("L(τ) = L_sched + s·L_small + (1−s)·L_llm with s the small-tier share; defaults are the "
               "measured means (tier latency = total minus routing overhead).")
    inputs = st.columns(5)
    sched = inputs[0].number_input("L_sched ms", min_value=0.0, value=_or(measured.sched_ms if measured else None, 10.0),
                                 key="whatif_sched")
    small = inputs[1].number_input("L_small ms", min_value=0.0, value=_or(measured.small_ms if measured else None, 50.0),
                                 key="whatif_small")
    llm = inputs[2].number_input("L_llm ms", min_value=0.0, value=_or(measured.llm_ms if measured else None, 2000.0),
                               key="whatif_llm")
    tokens = inputs[3].number_input("Tokens per LLM call", min_value=0.0, value=_or(tokens_default, 300.0), key="whatif_tokens")
    price = inputs[4].number_input("USD per 1k tokens", min_value=0.0, value=float(settings.llm_price_per_1k_tokens),
                                 format="%.4f", key="whatif_price")
model = replay.LatencyModel(sched, small, llm)
curve = replay.sweep(replay_data, model, tokens, price)

current_tau = policy_store.current(ui.db()).route_threshold
at_current = curve.iloc[(curve["tau"] - current_tau).abs().argmin()]
facts = st.columns(4)
facts[0].metric("Live τ", f"{current_tau:.2f}")
facts[1].metric("LLM share at live τ", ui.format_pct(at_current["llm_share"]))
facts[2].metric("Modelled latency", ui.format_ms(at_current["latency_ms"]))
facts[3].metric("Cost / 1k requests", f"${at_current['cost_per_1k_requests']:.3f}")

charts = [("latency_ms", "mean latency (ms)"), ("cost_per_1k_requests", "USD per 1k requests")]
if curve["quality"].notna().any():
    charts.insert(0, ("quality", "expected quality"))
for col, (field, title) in zip(st.columns(len(charts)), charts):
    with col:
        st.altair_chart(
            alt.Chart(curve).mark_line(point=alt.OverlayMarkDef(size=12)).encode(
                x=alt.X("llm_share:Q", title="LLM share", axis=alt.Axis(format="%")),
                y=alt.Y(f"{field}:Q", title=title, scale=alt.Scale(zero=False)),
                tooltip=[alt.Tooltip("tau:Q", format=".2f"), alt.Tooltip("llm_share:Q", format=".1%"),
                         alt.Tooltip(f"{field}:Q", format=",.3f")]),
            width="stretch")

summary = replay.gap_summary(replay_data)
if summary["labelled"]:
    st.subheader("Performance gap recovered")
    gap_facts = st.columns(5)
    gap_facts[0].metric("Quality small only", ui.format_pct(summary["q_small"]))
    gap_facts[1].metric("Quality LLM only", ui.format_pct(summary["q_llm"]))
    gap_facts[2].metric("APGR", "–" if math.isnan(summary["apgr"]) else f"{summary['apgr']:.3f}")
    gap_facts[3].metric("CPT(50%)", ui.format_pct(summary["cpt50"]), help="LLM share needed to recover 50% of the gap")
    gap_facts[4].metric("CPT(80%)", ui.format_pct(summary["cpt80"]), help="LLM share needed to recover 80% of the gap")
    if math.isnan(summary["apgr"]):
        st.caption("The small tier is as good as the LLM on the labelled rows: no gap to recover.")
    else:
        gap = replay.gap_curve(replay_data)
        st.altair_chart(alt.Chart(gap).mark_line(interpolate="step-after").encode(
            x=alt.X("llm_share:Q", title="LLM share", axis=alt.Axis(format="%")),
            y=alt.Y("pgr:Q", title="performance gap recovered")), width="stretch")

with st.expander("Sweep table"):
    st.dataframe(curve.round(4), hide_index=True)

st.subheader("Pick τ")
mode = st.radio("Target", ["LLM share", "Latency SLO"], horizontal=True, key="whatif_mode")
if mode == "LLM share":
    target = st.slider("Target LLM share", 0.0, 1.0, 0.3, 0.01, key="whatif_target_share")
    tau, share = replay.tau_for_llm_share(replay_data, target)
    picked: tuple[float, str] | None = (tau, f"target LLM share {target:.0%} (replay: {share:.1%})")
else:
    slo = st.number_input("Mean latency SLO (ms)", min_value=0.0, value=round(float(model.at(0.7))), key="whatif_slo")
    found = replay.tau_for_latency_slo(replay_data, model, slo)
    picked = None if found is None else (found[0], f"latency SLO {slo:.0f} ms (replay: {found[1]:.0f} ms)")
    if found is None:
        st.warning("No τ meets this SLO, even with no LLM traffic.")
if picked:
    tau, why = picked
    st.metric("Suggested τ", f"{tau:.3f}")
    if st.button(f"Apply τ = {tau:.3f}", type="primary", key="whatif_apply"):
        try:
            saved = policy_store.save(ui.db(), {"route_threshold": tau}, author=ui.operator(), reason=f"what-if: {why}")
        except ValueError as exc:
            st.error(f"Not applied: {exc}")
        else:
            st.success(f"Applied as settings version {saved.version}.")
