"""Overview: traffic per route, latency percentiles, cache hits, LLM share and cost, feedback, LLM load."""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from chains.handoff_stats import handoff_numbers
from chains.learning import proposal_counts
from chains.tiers.base import ROUTES
from console import data, stats, ui
from core.settings import get_settings
from ops import alerts, logframes

settings = get_settings()
# LLM seconds and cache milliseconds share a chart: a symlog scale (bars still start at 0) with decade ticks.
LOG_MS: dict[str, Any] = dict(scale=alt.Scale(type="symlog"), axis=alt.Axis(values=[0, 1, 10, 100, 1000, 10000],
                                                                          format=","))


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


st.title("Overview")
_open = alerts.open_alerts(ui.db())
if _open:  # the banner: every open alert, linked to the page that acknowledges it
    st.error(f"{len(_open)} open alert(s): " + "; ".join(a.message for a in _open[:3])
             + (" …" if len(_open) > 3 else ""), icon=":material/notifications_active:")
    st.page_link("views/alerts.py", label="Open the Alerts page")
frame = ui.requests_frame()
feedback = ui.feedback_frame()
numbers = stats.summary(frame, feedback, settings.llm_price_per_1k_tokens)
st.caption(f"{ui.time_range()} · {numbers['requests']:,} requests")

cols = st.columns(6)
cols[0].metric("Requests", f"{numbers['requests']:,}")
cols[1].metric("LLM share", ui.format_pct(numbers["llm_share"]))
cols[2].metric("Cache hit rate", ui.format_pct(numbers["cache_hit_rate"]))
cols[3].metric("Est. LLM cost", f"${numbers['est_cost_usd']:,.4f}", help=f"{numbers['tokens']:,} tokens in "
               f"{numbers['llm_calls']:,} LLM calls × ${settings.llm_price_per_1k_tokens}/1k tokens")
cols[4].metric("Degraded / fallback", f"{numbers['degraded']} / {numbers['fallback']}")
cols[5].metric("Feedback", "–" if not numbers["feedback_n"] else f"{numbers['feedback_mean']:+.2f}",
               help=f"mean rating (±1) of {numbers['feedback_n']} ratings")

if frame.empty:
    st.info("No requests logged in this time range yet.")
else:
    left, right = st.columns([2, 1])
    with left:
        st.subheader("Traffic per route")
        freq = stats.bucket_for(ui.time_range(), frame)
        traffic = stats.traffic_over_time(frame, freq)
        # A temporal axis has no bands: size the bars so that neighbouring buckets nearly touch.
        buckets = max(1, int((traffic["time"].max() - traffic["time"].min()) / pd.Timedelta(freq)) + 1)
        st.altair_chart(
            alt.Chart(traffic).mark_bar(size=max(2, min(40, int(560 / buckets)))).encode(
                x=alt.X("time:T", title=None), y=alt.Y("requests:Q", title="requests"),
                color=alt.Color("route:N", sort=list(ROUTES)), tooltip=["time:T", "route:N", "requests:Q"]),
            width="stretch")
    with right:
        st.subheader("Route share")
        shares = stats.route_shares(frame)
        st.altair_chart(
            alt.Chart(shares).mark_arc(innerRadius=45).encode(
                theta="requests:Q", color=alt.Color("route:N", sort=list(ROUTES)),
                tooltip=["route:N", "requests:Q", alt.Tooltip("share:Q", format=".1%")]),
            width="stretch")

    left, right = st.columns(2)
    with left:
        st.subheader("Latency per route")
        by_route = stats.latency_by_route(frame)
        long = by_route.melt(id_vars=["route", "n"], value_vars=["p50", "p95", "p99"], var_name="percentile",
                             value_name="ms")
        st.altair_chart(
            alt.Chart(long).mark_bar().encode(
                x=alt.X("route:N", title=None), xOffset="percentile:N",
                y=alt.Y("ms:Q", title="ms (log)", **LOG_MS),
                color="percentile:N", tooltip=["route:N", "percentile:N", alt.Tooltip("ms:Q", format=",.0f"), "n:Q"]),
            width="stretch")
    with right:
        st.subheader("Latency per stage")
        by_stage = stats.latency_by_stage(frame)
        long = by_stage.melt(id_vars=["stage", "n"], value_vars=["p50", "p95", "p99"], var_name="percentile",
                             value_name="ms")
        st.altair_chart(
            alt.Chart(long).mark_bar().encode(
                y=alt.Y("stage:N", sort=[*logframes.STAGES, "total"], title=None), yOffset="percentile:N",
                x=alt.X("ms:Q", title="ms (log)", **LOG_MS), color="percentile:N",
                tooltip=["stage:N", "percentile:N", alt.Tooltip("ms:Q", format=",.1f"), "n:Q"]),
            width="stretch")
    with st.expander("Latency percentiles (table)"):
        st.dataframe(by_route.round(1), hide_index=True)
        st.dataframe(by_stage.round(1), hide_index=True)

st.subheader("Answer check")
summary, by_kind = stats.check_summary(frame)
checks = st.columns(3)
checks[0].metric("LLM answers checked", f"{summary['checked']:,}")
checks[1].metric("Changed by the check", f"{summary['changed']:,}")
checks[2].metric("Share changed", ui.format_pct(summary["changed"] / summary["checked"] if summary["checked"] else math.nan))
if not by_kind.empty:
    st.dataframe(by_kind, hide_index=True)

st.subheader("Rewrite verification")
verified, by_reason = stats.rewrite_rejections(frame)
rewrites = st.columns(3)
rewrites[0].metric("LLM rewrites", f"{verified['rewrites']:,}")
rewrites[1].metric("Rejected (draft served)", f"{verified['rejected']:,}")
rewrites[2].metric("Rejection rate", ui.format_pct(verified["rejected"] / verified["rewrites"]
                                                   if verified["rewrites"] else math.nan))
if not by_reason.empty:
    st.dataframe(by_reason, hide_index=True)

st.subheader("Suggested replies")
clicks = stats.suggestion_clicks(frame)
suggested = st.columns(4)
suggested[0].metric("Answers with suggestions", f"{clicks['offered']:,}")
suggested[1].metric("Clicked", f"{clicks['clicked']:,}", help="next messages that were a click on a suggested reply")
suggested[2].metric("Click rate", ui.format_pct(clicks["clicked"] / clicks["followed"] if clicks["followed"] else math.nan),
                    help="of the next messages after an answer with suggestions, in the same session")
suggested[3].metric("Next message among them", ui.format_pct(clicks["hits"] / clicks["followed"]
                                                              if clicks["followed"] else math.nan),
                    help="the next message, clicked or typed, was answered by one of the suggested answers")

asked = stats.which_one_questions(frame)
which = st.columns(3)
which[0].metric("Asked \"which one?\"", f"{asked['asked']:,}",
                help="help-center answers fit the message about equally well: the customer was asked to pick one")
which[1].metric("Share of requests", ui.format_pct(asked["asked"] / len(frame) if len(frame) else math.nan))
which[2].metric("A choice picked", ui.format_pct(asked["picked"] / asked["followed"] if asked["followed"] else math.nan),
                help="of the next messages after the question, in the same session: a click or a choice's number")

st.subheader("Handoffs to a person")
people = handoff_numbers(ui.db(), data.since_for(ui.time_range())).summary()
learned = proposal_counts(ui.db(), data.since_for(ui.time_range()))
handed = st.columns(5)
handed[0].metric("Handoffs", f"{people['handoffs']:,}")
handed[1].metric("Time to pick up (p50)", _seconds(people["pickup_p50_s"]),
                 help=f"from a handoff until an operator claimed it; p90 {_seconds(people['pickup_p90_s'])} over "
                      f"{people['pickups']} claims")
handed[2].metric("First human reply (p50)", _seconds(people["first_reply_p50_s"]),
                 help=f"from a handoff until the first operator message; p90 {_seconds(people['first_reply_p90_s'])} "
                      f"over {people['first_replies']} handoffs answered")
handed[3].metric("Resolved without a person", ui.format_pct(people["resolved_without_person"]
                                                             if people["resolved_without_person"] is not None
                                                             else math.nan),
                 help=f"{people['sessions'] - people['handed_over']:,} of {people['sessions']:,} customer "
                      "conversations never handed to a person")
handed[4].metric("KB answers learned", f"{learned['approved']:,} / {learned['made']:,}",
                 help=f"operators' replies approved / proposed as KB answers; {learned['now_answered']} of the "
                      "approved questions the small tier now answers")
if people["by_reason"]:
    st.dataframe(pd.DataFrame(sorted(people["by_reason"].items(), key=lambda kv: -kv[1]),
                              columns=["reason", "handoffs"]), hide_index=True)

st.subheader("LLM load and breaker")
health = data.app_health(settings.host, settings.app_port)
llm = (health or {}).get("llm") if isinstance((health or {}).get("llm"), dict) else None
if health is None:
    st.warning(f"Chat app not reachable at {settings.host}:{settings.app_port} — showing what the request log says.")
elif llm is None:
    st.info("The chat app answered /healthz but reported no LLM status.")
if llm:
    breaker = llm.get("breaker")
    breaker_state = breaker.get("state") if isinstance(breaker, dict) else breaker
    gauges = st.columns(4)
    load = llm.get("load")
    gauges[0].metric("LLM load", "–" if load is None else f"{float(load):.2f}")
    gauges[1].metric("Overloaded", "yes" if llm.get("overloaded") else "no")
    gauges[2].metric("Breaker", str(breaker_state or "–"))
    gauges[3].metric("In flight", str(llm.get("in_flight", "–")))
    vllm = llm.get("vllm") if isinstance(llm.get("vllm"), dict) else {}
    if vllm.get("prefix_cache_queries") is not None:  # vLLM's own counters (README "Conversation prefix reuse")
        prefix = st.columns(4)
        prefix[0].metric("Prefix-cache hit rate", ui.format_pct(vllm.get("prefix_cache_hit_rate") or 0.0),
                         help="Share of prompt tokens vLLM served from its prefix cache since it started.")
        recent = vllm.get("recent_prefix_cache_hit_rate")
        prefix[1].metric("Hit rate, last poll", "–" if recent is None else ui.format_pct(recent))
        caching = vllm.get("prefix_caching")
        prefix[3].metric("Prefix caching", "–" if caching is None else "on" if caching else "OFF")
        prefix[2].metric("Prompt tokens cached / looked up",
                         f"{int(vllm.get('prefix_cache_hits') or 0):,} / {int(vllm['prefix_cache_queries']):,}")
if not frame.empty:
    recent = frame.assign(time=frame["created_at"].dt.floor(stats.bucket_for(ui.time_range(), frame)))
    flags = recent.groupby("time")[["degraded", "fallback"]].sum().astype(int)
    if flags.to_numpy().sum():
        st.caption("Degraded and fallback answers over time (from the request log)")
        st.line_chart(flags)
    else:
        st.caption("No degraded or fallback answers in this time range (from the request log).")
