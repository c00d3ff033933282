"""Serving logic of the handoff API: who the operator is, whether a caller owns a conversation, the answers to a state
change that is not allowed (409), and the server-sent stream of a conversation's new messages.

The stream polls the database (every ``POLL_S``), not this process's memory, so an operator's reply sent through any
replica reaches a customer connected to any other.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from app.access import LEGACY_KEY_ID, Caller
from app.routes import ApiError
from chains.conversation import Conversations, IllegalTransition, Taken
from chains.runtime import Runtime
from storage.api_keys import key_name
from storage.customers import signed_owner
from storage.tables import ChatSession

POLL_S = 0.5          # how often the stream looks for new messages: an operator's reply shows within this
KEEPALIVE_S = 15.0    # a comment line this often keeps proxies from closing an idle stream
STREAM_MAX_S = 1800.0  # a stream ends after this; the client reconnects with Last-Event-ID


def conversations_of(runtime: Runtime) -> Conversations:
    conversations = runtime.service.conversations
    if conversations is None:
        raise ApiError(503, "this deployment has no conversation states", "inbox")
    return conversations


def operator_of(runtime: Runtime, caller: Caller, given: str = "") -> str:
    """Who acts: the name given, else the key's name (TANDEM_API_TOKEN: "admin")."""
    if given.strip():
        return given.strip()
    if caller.key_id == LEGACY_KEY_ID:
        return "admin"
    return key_name(runtime.db, caller.key_id) or caller.key_id or "operator"


def owns(runtime: Runtime, caller: Caller, session_id: str) -> bool:
    """Whether the caller opened this conversation (its signed customer, else its key or address); an admin key
    reads any."""
    if caller.operator:
        with runtime.db.session() as session:
            return session.get(ChatSession, session_id) is not None
    owner = signed_owner(caller.customer) if caller.customer else caller.client
    with runtime.db.session() as session:
        row = session.get(ChatSession, session_id)
    return row is not None and bool(owner) and row.owner == owner


def changed(action: Callable[[], Any], endpoint: str) -> Any:
    """Run a state change; one that is not allowed now answers 409 with why (who holds the conversation)."""
    try:
        return action()
    except Taken as exc:
        raise ApiError(409, str(exc), endpoint) from None
    except IllegalTransition as exc:
        raise ApiError(409, str(exc), endpoint) from None


async def message_events(conversations: Conversations, session_id: str, after: int,
                         disconnected: Callable[[], Any]) -> AsyncIterator[str]:
    """One `message` event per new message (its id as the event id), a `handoff` event when the conversation's
    handoff changes, a keep-alive comment while nothing happens."""
    last_view: Any = object()
    waited = elapsed = 0.0
    while elapsed < STREAM_MAX_S:
        if await disconnected():
            return
        messages = await run_in_threadpool(conversations.messages, session_id, after)
        for message in messages:
            after = max(after, int(message["id"]))
            yield f"id: {message['id']}\nevent: message\ndata: {json.dumps(message, ensure_ascii=False)}\n\n"
        view = await run_in_threadpool(lambda: conversations.view(conversations.state(session_id)))
        if view != last_view:
            last_view = view
            yield f"event: handoff\ndata: {json.dumps(view, ensure_ascii=False)}\n\n"
        if messages or waited >= KEEPALIVE_S:
            waited = 0.0
            if not messages:
                yield ": keep-alive\n\n"
        await asyncio.sleep(POLL_S)
        waited += POLL_S
        elapsed += POLL_S
