"""Prepared answers (issue 42, part 2): LLM answers the idle-time worker prepared for recurring LLM-bound questions
and stored in the shared response cache (ops/prepared.py), their hits, and a delete button for each."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import streamlit as st

from chains.cache import ResponseCache
from chains.runtime import open_state
from console import ui
from core.settings import get_settings
from ops.logframes import masked
from ops.prepared import delete_prepared, status_of, tokens_spent
from storage import prepared_store
from storage.tables import utcnow

settings = get_settings()
FLASH_KEY = "prepared_flash"
st.title("Prepared answers")
budget = settings.prepare_tokens_per_hour
st.caption("While the LLM engine is idle, the app asks the LLM for the most frequent recurring LLM-bound question that "
           "is not personal and has no fresh answer, through the chain like a customer's message (answer check, "
           "rewrite verification, logged with channel prepare), and stores an answer that passed in the response "
           "cache for the next customer who asks. A KB change retires them; a delete here removes one and keeps the "
           "worker from preparing it again for this KB version. "
           + (f"Budget: {budget:,} tokens an hour (TANDEM_PREPARE_TOKENS_PER_HOUR), "
              f"{tokens_spent(ui.db(), utcnow() - timedelta(hours=1)):,} spent in the last hour."
              if budget else "The worker is off (TANDEM_PREPARE_TOKENS_PER_HOUR=0, the default)."))
if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))

rows = prepared_store.listing(ui.db())
kb_version, now = ui.knowledge_base().version, utcnow()
mask = ui.mask_pii()
table = pd.DataFrame([{"id": r.id, "question": masked(r.question, mask), "answer": masked(r.answer, mask),
                       "status": status_of(r, kb_version, settings.cache_ttl_s, now), "hits": r.hits,
                       "last_hit": r.last_hit_at, "group_size": r.group_size, "tokens": r.tokens,
                       "kb_version": r.kb_version, "created": r.created_at} for r in rows],
                     columns=["id", "question", "answer", "status", "hits", "last_hit", "group_size", "tokens",
                              "kb_version", "created"])
if table.empty:
    st.info("No prepared answers.")
else:
    st.dataframe(table, hide_index=True, column_config={
        "question": st.column_config.TextColumn("question", width="medium"),
        "answer": st.column_config.TextColumn("answer", width="large"),
        "status": st.column_config.TextColumn("status", help="live, retired (the KB changed: no longer served), "
                                              "expired (past the cache's time-to-live)"),
        "last_hit": st.column_config.DatetimeColumn("last hit", format="YYYY-MM-DD HH:mm"),
        "group_size": st.column_config.NumberColumn("group size", help="messages in the recurring group")})
    # Deleting reaches the app's cache directly when it is shared (Redis); an app with its own in-process cache
    # stops serving the entry at its next lookup, because the record it is vouched by is gone.
    cache = ResponseCache(open_state(settings), settings.cache_ttl_s) if settings.redis_url else None
    for row in rows:
        cols = st.columns([8, 2])
        cols[0].markdown(f"**#{row.id}** {masked(row.question, mask)}")
        if cols[1].button("Delete", key=f"delete_prepared_{row.id}"):
            delete_prepared(ui.db(), int(row.id or 0), cache)
            st.session_state[FLASH_KEY] = f"Prepared answer #{row.id} deleted."
            st.rerun()
