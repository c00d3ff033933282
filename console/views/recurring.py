"""Recurring LLM-bound questions (issue 42, part 2): the messages the router sent to the LLM in the time range, grouped
by meaning in the knowledge base's embedding (ops/recurring.py). Personal groups are listed but flagged: answers are
never prepared for them (ops/prepared.py, page Prepared answers)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from console import data, ui
from core.settings import get_settings
from ops.recurring import SIMILARITY, recurring_questions, table_rows
from storage.db import open_database

TOP = 50


@st.cache_data(ttl=30, show_spinner="Grouping LLM-bound questions…")
def _groups(db_url: str, range_label: str, mask_pii: bool) -> pd.DataFrame:
    kb = ui.knowledge_base()
    groups = recurring_questions(open_database(db_url), kb.embed_messages, since=data.since_for(range_label),
                                 space_of=kb.space_for, top=TOP)
    return pd.DataFrame(table_rows(groups, mask_pii),
                        columns=["question", "count", "sessions", "last_seen", "personal", "personal_data",
                                 "examples", "sent_as"])


st.title("Recurring LLM-bound questions")
st.caption("Messages the router sent to the LLM (LLM answers, rewrites of a KB draft, and messages the load gate "
           "degraded or whose LLM call failed), grouped by meaning: a message joins a group when its mean cosine "
           f"to the members is at least {SIMILARITY[''] :.2f} (English, MiniLM) or {SIMILARITY['zh']:.2f} (Chinese, "
           "e5). The question shown is the group's most central message. When TANDEM_PREPARE_TOKENS_PER_HOUR gives "
           "it a budget, the app prepares answers for the largest groups while the LLM is idle (page Prepared "
           "answers); a personal group (an order number, email, phone or name in any message) is never prepared.")
table = _groups(get_settings().db_url, ui.time_range(), ui.mask_pii())
st.caption(f"{len(table):,} recurring questions (2 or more messages) in {ui.time_range()}, largest first"
           + (f" (the top {TOP})" if len(table) == TOP else ""))
if table.empty:
    st.info("No LLM-bound question recurs in this time range.")
else:
    st.dataframe(table, hide_index=True, column_config={
        "question": st.column_config.TextColumn("question", width="large"),
        "last_seen": st.column_config.DatetimeColumn("last seen", format="YYYY-MM-DD HH:mm"),
        "personal": st.column_config.CheckboxColumn("personal", help="never prepared"),
        "personal_data": st.column_config.TextColumn("personal data"),
        "sent_as": st.column_config.TextColumn("sent to the LLM as")})
