"""Learned answers: operators' replies to questions the knowledge base did not cover, proposed as KB answers (or, near
an existing answer, as the customer's wording added to it). One click approves: the answer is ingested (re-embedded)
and the question is re-asked through the chain, which shows whether the small tier now answers it citing the new
answer. The same loop the agent API drives (chains/learning.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlmodel import col, select

from chains.learning import APPROVED, PROPOSED, ProposalError, proposal_counts
from console import ui
from storage.tables import KbProposal

FLASH_KEY = "proposals_flash"
me = ui.operator()
st.title("Learned answers")
st.caption("An operator's reply to a question the knowledge base did not cover becomes a proposed answer. Approving "
           "ingests it and re-asks the question: the small tier should now answer it, citing the new answer.")
if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))
counts = proposal_counts(ui.db())
cols = st.columns(4)
cols[0].metric("Proposals made", f"{counts['made']:,}")
cols[1].metric("Approved", f"{counts['approved']:,}")
cols[2].metric("Waiting for approval", f"{counts['proposed']:,}")
cols[3].metric("Now answered by the bot", f"{counts['now_answered']:,}",
               help="approved answers whose question the small tier answered, citing them, when re-asked")
with ui.db().session() as session:
    rows = list(session.exec(select(KbProposal).order_by(col(KbProposal.id).desc()).limit(200)).all())
if not rows:
    st.info("No proposals yet: they come from operators' replies in the Inbox.")
    st.stop()


def decide(action, done: str) -> None:
    try:
        action()
    except ProposalError as exc:  # another operator decided it first
        st.error(str(exc))
        return
    st.session_state[FLASH_KEY] = done
    st.rerun()


for row in [r for r in rows if r.status == PROPOSED]:
    with st.container(border=True):
        kind = f"merge into **{row.merge_into}** (similarity {row.similarity:.2f})" if row.merge_into else "new answer"
        st.markdown(f"**Proposal {row.id}** by {row.operator} · {kind}")
        st.markdown("**Customer's question**")
        st.text(row.question)
        answer = st.text_area("Answer", value=row.answer, key=f"proposal_answer_{row.id}", height=120,
                              disabled=bool(row.merge_into),
                              help="the operator's reply (masked); edit before approving")
        left, right = st.columns(2)
        if left.button("Approve", key=f"proposal_approve_{row.id}", type="primary"):
            edited = "" if row.merge_into else answer
            decide(lambda pid=row.id, text=edited: ui.learning().approve(pid, me, text),
                   f"Proposal {row.id} approved and ingested.")
        if right.button("Reject", key=f"proposal_reject_{row.id}"):
            decide(lambda pid=row.id: ui.learning().reject(pid, me), f"Proposal {row.id} rejected.")

decided = [r for r in rows if r.status != PROPOSED]
if decided:
    st.subheader("Decided")
    st.dataframe(pd.DataFrame([{
        "id": r.id, "status": r.status, "question": r.question, "answer_id": r.answer_id, "by": r.decided_by,
        "now answered by the small tier": bool((r.check or {}).get("answered_by_small")) if r.status == APPROVED
        else None, "route now": (r.check or {}).get("route", "")} for r in decided]), hide_index=True)
