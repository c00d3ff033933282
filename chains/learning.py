"""Learning from the operator: a person's reply to a question the knowledge base does not cover becomes a proposed KB
answer; approving it ingests it and re-asks the question through the chain, to show whether the small tier now
answers it citing the new answer.

1. An operator replies in a conversation they hold (chains/conversation.py calls :meth:`Learning.propose`).
2. The escalating question is the handoff packet's question (for a customer who asked for a person in words, the
   question they asked before). It is re-routed now (as ``route_only``, past the cache; nothing is generated or logged):
   when the router sends it to the LLM (out of scope, no passage good enough), the KB does not cover it and the reply
   is proposed. One proposal per handoff; a later reply in the same handoff replaces the proposed text.
3. A reply whose encoder similarity to an existing KB answer reaches ``merge_similarity`` is a near-duplicate: it is
   proposed as a merge (the customer's wording becomes an example question of that answer), not as a new answer.
4. :meth:`Learning.approve` (one click in the console's inbox, or ``POST /api/v1/inbox/proposals/{id}/approve``)
   upserts the answer and its example question (the KB re-embeds the changed records; its version changes, so the
   response cache's keys change with it), then re-asks the question and stores the outcome on the proposal.

Approved answers are knowledge-base answers like any other: the small tier's answers citing them are cached, and an
LLM answer whose claims they support is vouched for (chains/router_chain.py ``_leans_on_the_conversation``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import update
from sqlmodel import col, func, select

from chains.conversation import ASKED, HUMAN, Conversations
from chains.schema import ChatRequest
from chains.tiers.base import LLM_ROUTE, SMALL_ROUTE
from chains.turn import Turn
from core.errors import TandemError
from core.policy import Thresholds
from knowledge.ingest import AnswerRow, QuestionRow
from storage.tables import KbProposal, RequestLog, table_of, utcnow

PROPOSED, APPROVED, REJECTED = "proposed", "approved", "rejected"
LEARNED_CATEGORY = "learned"
REWRITE_PLAN = "rewrite"
# A best passage under this (the retrieval's kb_top) is a weak match: the KB does not cover the question, whatever
# the route (the console's knowledge-gap list starts from the same value).
KB_TOP_FLOOR = 0.5
# Routes that answered a message (what a customer who then asked for a person in words had asked before).
_ANSWERING_ROUTES = ("small", "llm", "cache", "tool", "catalog")


class ProposalError(TandemError):
    """No such proposal, or it was decided already (``status``)."""

    def __init__(self, message: str, status: str = ""):
        super().__init__(message)
        self.status = status


class Learning:
    """Proposals over one database, KB and chain. ``thresholds`` gives the live policy (the chain routes with it);
    ``scrub`` masks what is stored; ``merge_similarity``: the encoder similarity from which a reply is a near-duplicate
    of an existing answer."""

    def __init__(self, chain: Any, conversations: Conversations, thresholds: Callable[[], Thresholds],
                 scrub: Callable[[str], str] = lambda text: text, merge_similarity: float = 0.8,
                 clock: Callable[[], datetime] = utcnow):
        self.chain, self.conversations, self.thresholds = chain, conversations, thresholds
        self.db, self.kb = conversations.db, chain.kb
        self.scrub, self.merge_similarity, self.clock = scrub, merge_similarity, clock

    # --- proposing -----------------------------------------------------------------------------------
    def question_of(self, session_id: str) -> tuple[str, str]:
        """(the escalating question, its request id) of the conversation's current handoff; ("", "") for none. A
        customer who asked for a person in words escalated with their earlier question, if any."""
        state = self.conversations.state(session_id)
        packet = state.packet or {}
        if state.trigger != ASKED:
            return str(packet.get("question") or "").strip(), state.request_id
        query = select(RequestLog).where(RequestLog.session_id == session_id,
                                         col(RequestLog.route).in_(_ANSWERING_ROUTES))
        if state.waiting_since is not None:
            query = query.where(col(RequestLog.created_at) <= state.waiting_since)
        with self.db.session() as session:
            earlier = session.exec(query.order_by(col(RequestLog.created_at).desc()).limit(1)).first()
        return (earlier.text.strip(), earlier.id) if earlier is not None else ("", "")

    def route_of(self, question: str) -> Turn:
        """The chain's routing decision for the question now, as ``route_only`` makes it (guard, rules, score,
        threshold; no answer is generated and nothing is logged) but past the response cache: a cached answer says
        what was served once, not whether the KB covers the question."""
        turn = Turn(request=ChatRequest(message=question, channel="batch"), thresholds=self.thresholds(),
                    past_cache=True)
        return self.chain.route_only.invoke(turn)

    def coverage(self, question: str) -> dict[str, Any]:
        """Whether the KB covers the question: not when the router sends it to the LLM (out of scope, or a draft
        under the KB's quality floor that only a rewrite would serve), nor when no passage matches it above
        :data:`KB_TOP_FLOOR`. A rule's route (a tool, a handoff) or a cached answer counts as covered."""
        turn = self.route_of(question)
        route = turn.route if turn.done else turn.plan
        kb_top = turn.scores.get("kb_top")
        weak = kb_top is not None and float(kb_top) < KB_TOP_FLOOR
        return {"covered": route not in (LLM_ROUTE, REWRITE_PLAN) and not weak, "route": route,
                "p_llm": turn.scores.get("p_llm"), "kb_top": kb_top, "weak_match": weak,
                "top_answers": [h.answer_id for h in turn.hits][:3]}

    def nearest_answer(self, text: str) -> tuple[str, float]:
        """The existing KB answer most like ``text`` by encoder similarity (answer_id, cosine); ("", 0.0) for none."""
        hits = [h for h in self.kb.search(text, k=5) if h.answer]
        if not hits:
            return "", 0.0
        encoder = self.kb.encoder_for(text)
        reply = np.asarray(encoder.encode_answer(text), dtype=np.float32)
        answers = np.asarray(encoder.encode_passages([h.answer for h in hits]), dtype=np.float32)
        sims = answers @ reply
        best = int(np.argmax(sims))
        return hits[best].answer_id, float(sims[best])

    def propose(self, session_id: str, operator: str, text: str) -> KbProposal | None:
        """The operator's reply as a proposed KB answer, when the conversation's escalating question is one the KB does
        not cover; None otherwise. Called after every operator reply."""
        state = self.conversations.state(session_id)
        if state.status != HUMAN or not text.strip():
            return None
        question, request_id = self.question_of(session_id)
        if not question:
            return None
        with self.db.session() as session:
            row = session.exec(select(KbProposal).where(KbProposal.session_id == session_id,
                                                        KbProposal.handoff_at == state.waiting_since)).first()
        if row is not None and row.status != PROPOSED:
            return None  # decided already: later replies in the same handoff change nothing
        if row is None:
            coverage = self.coverage(question)
            if coverage["covered"]:
                return None
            row = KbProposal(session_id=session_id, handoff_at=state.waiting_since, request_id=request_id,
                             question=self.scrub(question)[:2000], coverage=coverage, created_at=self.clock())
        answer = self.scrub(text.strip())[:4000]
        merge_into, similarity = self.nearest_answer(answer)
        row.answer, row.operator = answer, operator
        row.merge_into = merge_into if similarity >= self.merge_similarity else ""
        row.similarity = round(similarity, 4)
        with self.db.session() as session:
            session.add(row)
            session.commit()
            session.refresh(row)
        return row

    # --- deciding ------------------------------------------------------------------------------------
    def get(self, proposal_id: int) -> KbProposal:
        with self.db.session() as session:
            row = session.get(KbProposal, proposal_id)
        if row is None:
            raise ProposalError(f"no proposal {proposal_id}")
        return row

    def _decide(self, proposal_id: int, status: str, by: str, **values: Any) -> KbProposal:
        """Compare-and-set from proposed: two clicks (two operators, two replicas) never approve twice."""
        t = table_of(KbProposal)
        with self.db.session() as session:
            done = session.execute(update(t).where(t.c.id == proposal_id, t.c.status == PROPOSED).values(
                status=status, decided_by=by, decided_at=self.clock(), **values))
            session.commit()
        if done.rowcount != 1:  # type: ignore[attr-defined]
            current = self.get(proposal_id)
            raise ProposalError(f"proposal {proposal_id} is {current.status} already", current.status)
        return self.get(proposal_id)

    def reject(self, proposal_id: int, by: str) -> KbProposal:
        return self._decide(proposal_id, REJECTED, by)

    def approve(self, proposal_id: int, by: str, answer: str = "") -> KbProposal:
        """Ingest the proposal (a new answer with the customer's wording as its example question, or that wording
        added to the near-duplicate answer), then re-ask the question and store whether the small tier now answers
        it citing that answer. ``answer``: the approver's edit of the text (masked like the reply)."""
        row = self.get(proposal_id)
        text = self.scrub(answer.strip())[:4000] if answer.strip() else row.answer
        merge = bool(row.merge_into) and row.merge_into in self.kb.answer_texts()
        answer_id = row.merge_into if merge else f"operator_{proposal_id}"
        row = self._decide(proposal_id, APPROVED, by, answer=text, answer_id=answer_id)
        source = f"operator:{row.operator}"
        try:
            if not merge:
                self.kb.upsert_answers([AnswerRow(answer_id=answer_id, answer=text, title=row.question[:200],
                                                  category=LEARNED_CATEGORY, source=source)])
            self.kb.upsert_questions([QuestionRow(query=row.question, answer_id=answer_id, source=source)])
        except Exception:
            t = table_of(KbProposal)  # not ingested: back to proposed, for another try
            with self.db.session() as session:
                session.execute(update(t).where(t.c.id == proposal_id).values(status=PROPOSED, decided_by="",
                                                                               decided_at=None, answer_id=""))
                session.commit()
            raise
        check = self.reask(row.question, answer_id)
        t = table_of(KbProposal)
        with self.db.session() as session:
            session.execute(update(t).where(t.c.id == proposal_id).values(check=check))
            session.commit()
        return self.get(proposal_id)

    def reask(self, question: str, answer_id: str) -> dict[str, Any]:
        """The question through the chain again: the route it takes now, the answers its draft cites, and whether
        the small tier answers it citing ``answer_id``."""
        turn = self.route_of(question)
        if turn.done:
            route, cites = turn.route, [str(s.get("answer_id")) for s in turn.sources]
        else:
            route = turn.plan
            cites = [str(s.get("answer_id")) for s in (turn.draft.sources if turn.draft is not None else [])]
        return {"route": route, "cites": cites, "answered_by_small": route == SMALL_ROUTE and answer_id in cites,
                "p_llm": turn.scores.get("p_llm"), "kb_top": turn.scores.get("kb_top"), "kb_version": self.kb.version,
                "at": self.clock().isoformat()}

    # --- reading -------------------------------------------------------------------------------------
    def listing(self, status: str | None = None, limit: int = 200) -> list[KbProposal]:
        query = select(KbProposal).order_by(col(KbProposal.id).desc()).limit(limit)
        if status:
            query = query.where(KbProposal.status == status)
        with self.db.session() as session:
            return list(session.exec(query).all())


def proposal_counts(db: Any, since: datetime | None = None) -> dict[str, int]:
    """Proposals made (any status), approved, rejected, and approved ones whose question the small tier now answers
    (the questions the bot answers because of them), created at or after ``since``."""
    with db.session() as session:
        query = select(KbProposal.status, func.count()).group_by(KbProposal.status)
        if since is not None:
            query = query.where(col(KbProposal.created_at) >= since)
        by_status = {status: int(n) for status, n in session.exec(query).all()}
        approved = select(KbProposal).where(KbProposal.status == APPROVED)
        if since is not None:
            approved = approved.where(col(KbProposal.created_at) >= since)
        answered = sum(1 for row in session.exec(approved).all() if (row.check or {}).get("answered_by_small"))
    return {"made": sum(by_status.values()), "proposed": by_status.get(PROPOSED, 0),
            "approved": by_status.get(APPROVED, 0), "rejected": by_status.get(REJECTED, 0), "now_answered": answered}
