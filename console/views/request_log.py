"""Requests: searchable log, the full decision trace of one request, and the human handoff queue."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from console import data, ui

st.title("Requests")
frame = ui.requests_frame()

with st.container(border=True):
    cols = st.columns([3, 2, 2, 2])
    text_query = cols[0].text_input("Text contains", key="req_text")
    routes = cols[1].multiselect("Route", sorted(r for r in frame["route"].unique() if r), key="req_routes")
    user_query = cols[2].text_input("User", key="req_user")
    session_query = cols[3].text_input("Session", key="req_session")

shown = frame
if text_query:
    shown = shown[shown["text"].str.contains(text_query, case=False, regex=False)
                  | shown["answer"].str.contains(text_query, case=False, regex=False)]
if routes:
    shown = shown[shown["route"].isin(routes)]
if user_query:
    shown = shown[shown["user_id"].str.contains(user_query, case=False, regex=False)]
if session_query:
    shown = shown[shown["session_id"].str.contains(session_query, case=False, regex=False)]

st.caption(f"{len(shown):,} of {len(frame):,} requests in {ui.time_range()} (newest first)")
table = shown[["created_at", "route", "intent", "text", "user_id", "session_id", "total_ms", "p_llm", "degraded",
               "fallback", "cache_hit", "id"]].head(500)
st.dataframe(table, hide_index=True, column_config={
    "total_ms": st.column_config.NumberColumn("total ms", format="%.0f"),
    "p_llm": st.column_config.NumberColumn("p_llm", format="%.2f")})

if not shown.empty:
    options = list(table["id"])
    labels = {row.id: f"{row.created_at:%m-%d %H:%M:%S} · {row.route} · {row.text[:70]}" for row in table.itertuples()}
    chosen = st.selectbox("Inspect request", options, format_func=lambda rid: labels.get(rid, rid), key="req_pick")
    row = shown[shown["id"] == chosen].iloc[0]
    st.subheader("Decision trace")
    facts = st.columns(4)
    facts[0].metric("Route", " · ".join(filter(None, [row["route"], row.get("intent") or ""])) or "–")
    facts[1].metric("Total", ui.format_ms(row["total_ms"]))
    facts[2].metric("p_llm", "–" if pd.isna(row["p_llm"]) else f"{row['p_llm']:.3f}")
    facts[3].metric("Flags", ", ".join(f for f in ("degraded", "fallback", "cache_hit", "cancelled") if row[f]) or "none")
    # Customer and model text as plain text: a link or an image in it is never rendered in the operator's browser.
    st.markdown("**Message** (PII-masked)")
    st.text(row["text"] or "–")
    st.markdown("**Answer**")
    st.text(row["answer"] or "–")
    if row["error"]:
        st.error(f"Error: {row['error']}")
    trace = [step for step in row["trace"] if isinstance(step, dict)]  # in the order the chain ran them
    if trace:
        st.dataframe(pd.DataFrame([{
            "stage": step.get("stage", ""), "decision": str(step.get("decision", "")),
            "detail": json.dumps(step.get("detail", {}), ensure_ascii=False, default=str),
            "ms": step.get("ms")} for step in trace]), hide_index=True)
    else:
        st.caption("No trace was logged for this request.")
    if row["reasons"]:
        st.markdown("**Reasons**: " + "; ".join(map(str, row["reasons"])))
    if row["served"]:
        st.markdown(f"**Served**: {row['served']}")
    if row["findings"]:
        st.markdown("**Answer check**")
        st.dataframe(pd.DataFrame(row["findings"]), hide_index=True)
    if row["rejected_text"]:
        st.markdown("**Rejected LLM text** (never shown to the customer)")
        st.text(row["rejected_text"])  # as plain text: nothing the model wrote is rendered
    left, mid, right = st.columns(3)
    with left:
        st.markdown("**Scores**")
        st.json(row["scores"] or {})
    with mid:
        st.markdown("**Latency (ms)**")
        latency = {k: v for k, v in (row["latency"] or {}).items() if isinstance(v, (int, float))}
        if latency:
            st.bar_chart(pd.Series(latency, name="ms"), horizontal=True)
        else:
            st.caption("none logged")
    with right:
        st.markdown("**Sources**")
        if row["sources"]:
            st.dataframe(pd.DataFrame(row["sources"]), hide_index=True)
        else:
            st.caption("none")
        st.markdown("**Feedback**")
        ratings = data.feedback_for(ui.db(), chosen, ui.mask_pii())
        if ratings:
            st.dataframe(pd.DataFrame(ratings)[["rating", "answer_id", "comment", "created_at"]], hide_index=True)
        else:
            st.caption("none")
    st.caption(f"id {row['id']} · model {row['model'] or '–'} · tokens {row['prompt_tokens']}+{row['completion_tokens']}"
               f" · KB {row['kb_version'] or '–'} · settings v{row['settings_version']}")

st.divider()
st.subheader("Handoff queue")
handoffs = data.open_handoffs(ui.db(), ui.mask_pii())
if handoffs.empty:
    st.caption("No open handoffs.")
for handoff in handoffs.itertuples():
    cols = st.columns([2, 2, 5, 1])
    cols[0].write(f"{handoff.created_at:%Y-%m-%d %H:%M}")
    cols[1].text(f"user {handoff.user_id or '–'}")  # chosen by the caller: plain text, like the note
    cols[2].text(handoff.note or f"session {handoff.session_id}")
    if cols[3].button("Done", key=f"handoff_done_{handoff.id}"):
        data.mark_handoff_done(ui.db(), int(handoff.id))
        st.rerun()
