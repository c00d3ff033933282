"""Serving logic shared by the HTTP APIs and the chat UI: the runtime or why there is none, the HTTP status of a
refusal, and the service's stream run off the event loop.

The service's ``stream`` is a plain generator that may block on the LLM for seconds. Here it runs in a
thread of its own and hands its items over a queue, so the front end stays responsive, and a front end
that goes away (a client disconnects, a customer presses Stop) only sets the turn's cancel event: the
service still finishes, aborts the engine's request at the next token, and logs the row as cancelled.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

from chains.ratelimit import LimitKeys
from chains.runtime import Runtime
from chains.schema import ChatRequest, ChatResponse, Decided, Revised
from chains.service import TandemService
from core.errors import TandemError

# Guard refusals that mean "the client sent something unusable", by code (ChatResponse.refusal), and the status
# Tandem's API answers them with; the guard's message is the error text. Any other guard answer (no words, an
# internal-error apology) is a chat answer: 200.
REFUSAL_STATUS: Mapping[str, int] = {"too_long": 413, "empty": 422, "control_only": 422, "rate_limited": 429}
# OpenAI's API differs: every unusable message is a 400 (its SDKs raise BadRequestError), and it takes attachments.
OPENAI_REFUSAL_STATUS: Mapping[str, int] = {
    **REFUSAL_STATUS, **dict.fromkeys(("too_long", "empty", "control_only", "attachment_unreadable"), 400)}

# What the pump puts after the last item: the producer is done (it ended, or raised and its exception went first).
END = object()


class Unavailable(TandemError):
    """No runtime to answer with: it is still being built, or building it failed. The APIs answer 503
    (app.server maps it, in each API's shape); the chat UI shows the message like any TandemError."""


def available_runtime(state: Any) -> Runtime:
    """The app's runtime (``app.state``), or :class:`Unavailable` saying what kept it from being built."""
    runtime = getattr(state, "runtime", None)
    if runtime is None:
        problems = state.warm.get("problems") or ["still starting"]
        raise Unavailable(f"the assistant is not available: {'; '.join(problems)}")
    return runtime


def refusal_status(response: ChatResponse, statuses: Mapping[str, int] = REFUSAL_STATUS) -> int | None:
    """The HTTP error status for a refused message (``statuses``: an API's table above); None for an answer."""
    if response.route != "guard":
        return None
    return statuses.get(response.refusal)


def over_limit(runtime: Runtime, keys: LimitKeys, request: ChatRequest) -> ChatResponse | None:
    """The rate limits, before anything of the message is read (OCR and Whisper are what a flood would cost): over
    them, the refusal, answered and logged as a guard row; None to go on."""
    refusal = runtime.limiter.check(keys)
    return runtime.service.refuse(request, refusal, "guard: rate limited", "rate_limited") if refusal else None


def pump(produce: Callable[[], Iterable[Any]], put: Callable[[object], None], name: str) -> None:
    """Run the blocking ``produce()`` in a daemon thread of its own and ``put`` each item it yields, the exception
    it raises (as an item: the consumer decides what to tell the customer), and :data:`END` last, always."""
    def run() -> None:
        try:
            for item in produce():
                put(item)
        except Exception as exc:
            put(exc)
        finally:
            put(END)

    threading.Thread(target=run, name=name, daemon=True).start()


def drain(items: queue.Queue) -> Iterator[str | Decided | Revised | ChatResponse | Exception]:
    """The queue's items until :data:`END`."""
    while (item := items.get()) is not END:
        yield item


async def stream_async(service: TandemService, request: ChatRequest,
                       cancel: threading.Event) -> AsyncIterator[str | Decided | Revised | ChatResponse | Exception]:
    """The same stream for an async front end. Closing this iterator (a disconnect) cancels the turn."""
    loop = asyncio.get_running_loop()
    handoff: asyncio.Queue = asyncio.Queue()

    def put(item: object) -> None:
        try:
            loop.call_soon_threadsafe(handoff.put_nowait, item)
        except RuntimeError:  # the loop is gone (server shutting down): the service still logs the row
            cancel.set()

    pump(lambda: service.stream(request, cancel), put, "tandem-http-turn")
    try:
        while (item := await handoff.get()) is not END:
            yield item
    finally:
        cancel.set()  # harmless after the end; mid-stream it aborts the LLM request
