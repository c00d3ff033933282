"""HTTP routes of the handoff: the customer's conversation and the operators' inbox.

- `GET /api/v1/sessions/{id}/messages?after=ID` and `GET /api/v1/sessions/{id}/events` (server-sent events): the
  conversation's new messages (an operator's replies among them) for the customer who opened it.
- `POST /api/v1/sessions/{id}/cancel`: the customer stops waiting for a person.
- `GET /api/v1/inbox`, `POST /api/v1/inbox/{id}/claim|reply|transfer|release`, `GET /api/v1/inbox/{id}/messages`: the
  operators' inbox, with an `agent` (or `admin`) key; the history carries the signed customer and their orders
  (`customer`, null for a guest). A change that is not allowed now (another operator holds the
  conversation) is a 409.
- `GET /api/v1/inbox/proposals`, `POST /api/v1/inbox/proposals/{id}/approve|reject`: operators' replies proposed as
  KB answers (chains/learning.py); approving ingests one and re-asks its question.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.access import Caller
from app.inbox_protocol import (
    ApproveIn,
    ConversationOut,
    InboxOut,
    MessagesOut,
    OperatorIn,
    ProposalOut,
    ProposalsOut,
    ReleaseIn,
    ReplyIn,
    TransferIn,
)
from app.inbox_serving import changed, conversations_of, message_events, operator_of, owns
from app.protocol import ERROR_RESPONSES
from app.routes import API_RESPONSES, ApiError, caller_of, runtime_of
from chains.conversation import WAITING
from chains.learning import Learning, ProposalError
from chains.runtime import Runtime
from storage.tables import KbProposal

router = APIRouter()


async def _owned(runtime: Runtime, caller: Caller, session_id: str) -> None:
    if not await run_in_threadpool(owns, runtime, caller, session_id):
        raise ApiError(404, f"no conversation '{session_id}' of yours", "sessions")


@router.get("/api/v1/sessions/{session_id}/messages", response_model=MessagesOut, responses=ERROR_RESPONSES,
            response_model_exclude_none=True)
async def session_messages(session_id: str, after: int = Query(0, ge=0), caller: Caller = Depends(caller_of),
                           runtime: Runtime = Depends(runtime_of)) -> Any:
    """The conversation's messages after message `after` (customer, assistant and operator, oldest first) and where
    it stands with a person. Only the customer (or key, or address) that opened the conversation may read it."""
    await _owned(runtime, caller, session_id)
    conversations = conversations_of(runtime)

    def read() -> dict[str, Any]:
        return {"messages": conversations.messages(session_id, after),
                "handoff": conversations.view(conversations.state(session_id))}

    body = await run_in_threadpool(read)
    API_RESPONSES.labels(endpoint="sessions", status="200").inc()
    return body


@router.get("/api/v1/sessions/{session_id}/events", responses=ERROR_RESPONSES)
async def session_events(request: Request, session_id: str, after: int = Query(0, ge=0),
                         last_event_id: str = Header("", alias="Last-Event-ID"), caller: Caller = Depends(caller_of),
                         runtime: Runtime = Depends(runtime_of)) -> StreamingResponse:
    """The same as server-sent events: `message` (one per new message, its id as the event id) and `handoff` (where
    the conversation stands, on every change). A reconnecting client's Last-Event-ID resumes after that message."""
    await _owned(runtime, caller, session_id)
    start = max(after, int(last_event_id) if last_event_id.isdigit() else 0)
    API_RESPONSES.labels(endpoint="sessions_events", status="200").inc()
    return StreamingResponse(message_events(conversations_of(runtime), session_id, start, request.is_disconnected),
                             media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


@router.post("/api/v1/sessions/{session_id}/cancel", response_model=ConversationOut, responses=ERROR_RESPONSES)
async def session_cancel(session_id: str, caller: Caller = Depends(caller_of),
                         runtime: Runtime = Depends(runtime_of)) -> ConversationOut:
    """The customer no longer waits for a person: the bot answers again (409 once a person holds it)."""
    await _owned(runtime, caller, session_id)
    conversations = conversations_of(runtime)
    state = await run_in_threadpool(changed, lambda: conversations.cancel(session_id), "sessions")
    return ConversationOut(session_id=session_id, status=state.status, operator=state.operator)


@router.get("/api/v1/inbox", response_model=InboxOut, responses=ERROR_RESPONSES)
async def inbox(operator: str = Query("", max_length=80), caller: Caller = Depends(caller_of),
                runtime: Runtime = Depends(runtime_of)) -> InboxOut:
    """Conversations waiting for a person or held by one, the longest wait first, each with why it was handed over
    and the handoff packet (unsent suggestions). Calling it counts the operator as online."""
    conversations = conversations_of(runtime)

    def read() -> InboxOut:
        conversations.seen(operator_of(runtime, caller, operator))
        items = conversations.inbox()
        return InboxOut.model_validate({"conversations": items,
                                        "count": sum(1 for item in items if item["status"] == WAITING)})

    body = await run_in_threadpool(read)
    API_RESPONSES.labels(endpoint="inbox", status="200").inc()
    return body


@router.get("/api/v1/inbox/{session_id}/messages", responses=ERROR_RESPONSES)
async def inbox_history(session_id: str, caller: Caller = Depends(caller_of),
                        runtime: Runtime = Depends(runtime_of)) -> dict[str, Any]:
    """The whole conversation as stored (masked), operators' notes included, its state, and its customer: the signed
    customer's id and orders (newest first, no e-mail address), or null for a guest (identity unverified)."""
    conversations = conversations_of(runtime)

    def read() -> dict[str, Any]:
        state = conversations.state(session_id)
        return {"session_id": session_id, "status": state.status, "operator": state.operator,
                "reason": state.reason, "packet": state.packet or {}, "messages": conversations.history(session_id),
                "customer": conversations.customer(session_id)}

    return await run_in_threadpool(read)


@router.post("/api/v1/inbox/{session_id}/claim", response_model=ConversationOut, responses=ERROR_RESPONSES)
async def claim(session_id: str, body: OperatorIn | None = None, caller: Caller = Depends(caller_of),
                runtime: Runtime = Depends(runtime_of)) -> ConversationOut:
    """Take a waiting conversation: the bot stays quiet from now on. 409 when another operator holds it."""
    conversations = conversations_of(runtime)
    name = operator_of(runtime, caller, body.operator if body else "")

    def act() -> ConversationOut:
        conversations.seen(name)
        state = changed(lambda: conversations.claim(session_id, name), "inbox")
        return ConversationOut(session_id=session_id, status=state.status, operator=state.operator)

    return await run_in_threadpool(act)


@router.post("/api/v1/inbox/{session_id}/reply", response_model=ConversationOut, responses=ERROR_RESPONSES)
async def reply(session_id: str, body: ReplyIn, caller: Caller = Depends(caller_of),
                runtime: Runtime = Depends(runtime_of)) -> ConversationOut:
    """Send the customer a message (only the operator holding the conversation). Stored masked like every log; the
    customer's chat gets it as written."""
    conversations = conversations_of(runtime)
    name = operator_of(runtime, caller, body.operator)

    def act() -> ConversationOut:
        conversations.seen(name)
        row = changed(lambda: conversations.reply(session_id, name, body.text), "inbox")
        return ConversationOut(session_id=session_id, status="human", operator=name, message_id=row.id)

    return await run_in_threadpool(act)


@router.post("/api/v1/inbox/{session_id}/transfer", response_model=ConversationOut, responses=ERROR_RESPONSES)
async def transfer(session_id: str, body: TransferIn, caller: Caller = Depends(caller_of),
                   runtime: Runtime = Depends(runtime_of)) -> ConversationOut:
    """Give the conversation to another operator (only the operator holding it)."""
    conversations = conversations_of(runtime)
    name = operator_of(runtime, caller, body.operator)

    def act() -> ConversationOut:
        conversations.seen(name)
        state = changed(lambda: conversations.transfer(session_id, name, body.to.strip()), "inbox")
        return ConversationOut(session_id=session_id, status=state.status, operator=state.operator)

    return await run_in_threadpool(act)


@router.post("/api/v1/inbox/{session_id}/release", response_model=ConversationOut, responses=ERROR_RESPONSES)
async def release(session_id: str, body: ReleaseIn | None = None, caller: Caller = Depends(caller_of),
                  runtime: Runtime = Depends(runtime_of)) -> ConversationOut:
    """Hand the conversation back to the bot, with a one-line summary it keeps in the conversation's context."""
    conversations = conversations_of(runtime)
    name = operator_of(runtime, caller, body.operator if body else "")
    summary = body.summary if body else ""

    def act() -> ConversationOut:
        conversations.seen(name)
        state = changed(lambda: conversations.release(session_id, name, summary), "inbox")
        return ConversationOut(session_id=session_id, status=state.status, operator=state.operator)

    return await run_in_threadpool(act)


def _learning(runtime: Runtime) -> Learning:
    if runtime.learning is None:
        raise ApiError(503, "this deployment does not learn from operators", "inbox")
    return runtime.learning


def _proposal_out(row: KbProposal) -> ProposalOut:
    return ProposalOut.model_validate({**row.model_dump(), "created_at": row.created_at.isoformat()
                                       if row.created_at else None})


def _decided(action: Callable[[], KbProposal]) -> ProposalOut:
    try:
        return _proposal_out(action())
    except ProposalError as exc:
        raise ApiError(409 if exc.status else 404, str(exc), "inbox") from None


@router.get("/api/v1/inbox/proposals", response_model=ProposalsOut, responses=ERROR_RESPONSES)
async def proposals(status: str = Query("", max_length=20), caller: Caller = Depends(caller_of),
                    runtime: Runtime = Depends(runtime_of)) -> ProposalsOut:
    """Operators' replies proposed as KB answers (newest first; `status`: proposed, approved or rejected)."""
    learning = _learning(runtime)
    rows = await run_in_threadpool(learning.listing, status or None)
    return ProposalsOut(proposals=[_proposal_out(row) for row in rows])


@router.post("/api/v1/inbox/proposals/{proposal_id}/approve", response_model=ProposalOut, responses=ERROR_RESPONSES)
async def approve_proposal(proposal_id: int, body: ApproveIn | None = None, caller: Caller = Depends(caller_of),
                           runtime: Runtime = Depends(runtime_of)) -> ProposalOut:
    """Approve a proposed answer: it is ingested into the knowledge base (re-embedded), then the question is re-asked
    through the chain; `check.answered_by_small` says whether the small tier now answers it citing the new answer.
    409 when it was decided already."""
    learning = _learning(runtime)
    name = operator_of(runtime, caller, body.operator if body else "")
    edited = body.answer if body else ""
    return await run_in_threadpool(_decided, lambda: learning.approve(proposal_id, name, edited))


@router.post("/api/v1/inbox/proposals/{proposal_id}/reject", response_model=ProposalOut, responses=ERROR_RESPONSES)
async def reject_proposal(proposal_id: int, body: OperatorIn | None = None, caller: Caller = Depends(caller_of),
                          runtime: Runtime = Depends(runtime_of)) -> ProposalOut:
    """Reject a proposed answer (nothing is ingested). 409 when it was decided already."""
    learning = _learning(runtime)
    name = operator_of(runtime, caller, body.operator if body else "")
    return await run_in_threadpool(_decided, lambda: learning.reject(proposal_id, name))
