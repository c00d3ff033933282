"""HTTP routes: `POST /api/v1/chat`, `POST /api/v1/feedback`, `GET /healthz`, `GET /metrics`.

Bodies are typed (:mod:`app.protocol`), so `/api/docs` shows them. Every error is JSON ``{"error": "..."}``
with a 4xx status (the handlers in :mod:`app.server` turn validation errors into that shape); bad input
never produces a 500. Model calls run off the event loop, so the UI keeps being served.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, generate_latest
from starlette.concurrency import run_in_threadpool

from app.access import Caller, Gate
from app.media import AttachmentError, MediaReader
from app.openai_serving import data_url_file
from app.protocol import ERROR_RESPONSES, ChatIn, ChatOut, ErrorOut, FeedbackIn, FeedbackOut, KbAnswersIn, KbAnswersOut
from app.serving import REFUSAL_STATUS, available_runtime, over_limit, refusal_status, stream_async
from chains.metrics import get_or_create
from chains.ratelimit import retry_after_s
from chains.runtime import Runtime
from chains.schema import ChatRequest, ChatResponse, Decided, Revised
from core.settings import Settings
from knowledge.ingest import AnswerRow, QuestionRow

router = APIRouter()

API_RESPONSES = get_or_create(Counter, "tandem_api_responses", "HTTP API responses by endpoint and status code.",
                              labelnames=["endpoint", "status"])


class ApiError(Exception):
    """Raised by a route; :func:`app.server.create_app` answers it as an :class:`ErrorOut` body."""

    def __init__(self, status: int, message: str, endpoint: str = "other", headers: dict[str, str] | None = None,
                 **extra: Any):
        super().__init__(message)
        self.status, self.message, self.endpoint, self.headers, self.extra = status, message, endpoint, headers, extra

    def response(self) -> JSONResponse:
        API_RESPONSES.labels(endpoint=self.endpoint, status=str(self.status)).inc()
        body = ErrorOut(error=self.message, **self.extra).model_dump(exclude_none=True)
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def settings_of(request: Request) -> Settings:
    return request.app.state.settings


def runtime_of(request: Request) -> Runtime:
    return available_runtime(request.app.state)


def gate_of(request: Request) -> Gate:
    return request.app.state.gate


def caller_of(request: Request) -> Caller:
    """The checked caller (key, scope, signed customer); AccessDenied answers 401/403 in the path's API shape."""
    return gate_of(request).caller(path=request.url.path, peer=request.client.host if request.client else "",
                                   headers=request.headers)  # type: ignore[arg-type]  # a case-insensitive mapping


def admitted(runtime: Runtime, caller: Caller, request: ChatRequest, endpoint: str) -> None:
    """The rate limits, before anything of the message is read: over them, a logged row and a 429."""
    if (refused := over_limit(runtime, caller.limit_keys, request)) is not None:
        raise ApiError(REFUSAL_STATUS["rate_limited"], refused.answer, endpoint,
                       headers={"Retry-After": str(retry_after_s(refused.answer))},
                       request_id=refused.request_id, session_id=refused.session_id)


@router.post("/api/v1/chat", response_model=ChatOut, responses=ERROR_RESPONSES, response_model_exclude_none=True)
async def chat(body: ChatIn, runtime_request: Request, caller: Caller = Depends(caller_of),
               runtime: Runtime = Depends(runtime_of)) -> Any:
    """Answer one customer message. With `"stream": true` the answer comes as server-sent events:
    `{"route", "request_id"}` (with `products` and `filters` when the answer has product cards: advice's come
    before the LLM's first word), `{"delta": "..."}` pieces, then `{"done": <the same object as the non-streamed
    answer>}`. A `{"replace": "..."}`
    event replaces everything shown so far: a verified rewrite of the knowledge-base draft shown first, or what is
    served instead of an LLM answer that failed its checks."""
    request = ChatRequest(message=body.message, session_id=body.session_id, user_id=body.user_id,
                          customer=caller.customer, client=caller.client, channel="api", modality="text",
                          suggestion=body.suggestion)
    await run_in_threadpool(admitted, runtime, caller, request, "chat")
    if body.images:  # read after the rate limits, off the event loop
        request = await run_in_threadpool(with_images, request_media(runtime_request), request, body.images)
    if body.stream:
        return StreamingResponse(_events(runtime, request, caller.operator), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})
    response: ChatResponse = await run_in_threadpool(runtime.service.answer, request)
    if (status := refusal_status(response)) is not None:
        raise ApiError(status, response.answer, "chat", request_id=response.request_id,
                       session_id=response.session_id)
    API_RESPONSES.labels(endpoint="chat", status="200").inc()
    return ChatOut.of(response, caller.operator)


def request_media(request: Request) -> MediaReader:
    return request.app.state.media


def with_images(media: MediaReader, request: ChatRequest, urls: list[str]) -> ChatRequest:
    """The request with its images read: their OCR text as ``extracted``, their barcodes and text as ``photos``, and
    a customer-facing line for each image that could not be read. The files are deleted once read."""
    paths, errors = [], []
    for url in urls:
        try:
            paths.append(data_url_file(url))
        except AttachmentError as exc:
            errors.append(str(exc))
    extracted, photos, unread = media.read_and_delete(paths)
    errors += unread
    modality = "+".join((["text"] if request.message.strip() else []) + ["image"])
    return request.model_copy(update={"extracted": extracted, "photos": photos, "attachment_errors": errors,
                                      "modality": modality})


async def _events(runtime: Runtime, request: ChatRequest, operator: bool) -> AsyncIterator[str]:
    API_RESPONSES.labels(endpoint="chat_stream", status="200").inc()
    async for item in stream_async(runtime.service, request, threading.Event()):
        if isinstance(item, ChatResponse):
            done = ChatOut.of(item, operator).model_dump(exclude_none=True)
            yield f"data: {json.dumps({'done': done}, ensure_ascii=False)}\n\n"
        elif isinstance(item, Decided):  # advice's cards come with the route, before the LLM's first word
            decided: dict[str, Any] = {"route": item.route, "request_id": item.request_id}
            decided.update({key: value for key, value in (("products", item.products), ("filters", item.filters))
                            if value})
            yield f"data: {json.dumps(decided, ensure_ascii=False)}\n\n"
        elif isinstance(item, Revised):  # everything shown so far is replaced by this text
            yield f"data: {json.dumps({'replace': item.text}, ensure_ascii=False)}\n\n"
        elif isinstance(item, Exception):
            yield f"data: {json.dumps({'error': 'internal error; it has been logged'})}\n\n"
        else:
            yield f"data: {json.dumps({'delta': item}, ensure_ascii=False)}\n\n"


@router.post("/api/v1/feedback", response_model=FeedbackOut, responses=ERROR_RESPONSES,
             dependencies=[Depends(caller_of)])
async def feedback(body: FeedbackIn, runtime: Runtime = Depends(runtime_of)) -> FeedbackOut:
    """Thumbs up (+1) or down (-1) on an answer, with an optional comment."""
    if not await run_in_threadpool(runtime.service.request_exists, body.request_id):
        raise ApiError(404, f"no answer with request_id '{body.request_id}'", "feedback")
    await run_in_threadpool(runtime.service.feedback, body.request_id, body.rating, body.comment, body.user_id)
    API_RESPONSES.labels(endpoint="feedback", status="200").inc()
    return FeedbackOut(request_id=body.request_id)


@router.post("/api/v1/kb/answers", response_model=KbAnswersOut, responses=ERROR_RESPONSES,
             dependencies=[Depends(caller_of)])
async def kb_answers(body: KbAnswersIn, runtime: Runtime = Depends(runtime_of)) -> KbAnswersOut:
    """Add or replace answers (and their example questions) in the knowledge base. An operator's call: it needs a
    key with the `kb` or `admin` scope. Every replica serves the change within seconds (they share the vector
    store)."""
    rows = [AnswerRow(answer_id=a.answer_id, answer=a.answer, title=a.title, source="api", origin="api")
            for a in body.answers]
    questions = [QuestionRow(query=q, answer_id=a.answer_id, source="api") for a in body.answers
                 for q in a.questions if q.strip()]

    def write() -> None:
        runtime.kb.upsert_answers(rows)
        if questions:
            runtime.kb.upsert_questions(questions)

    await run_in_threadpool(write)
    API_RESPONSES.labels(endpoint="kb", status="200").inc()
    return KbAnswersOut(answers=len(rows), questions=len(questions), kb_version=runtime.kb.version)


@router.api_route("/api/v1/chat", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
@router.api_route("/api/v1/feedback", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def wrong_method(request: Request) -> Response:
    # Without this the Gradio app mounted at "/" would answer these with an HTML 404.
    raise ApiError(405, f"{request.method} is not supported here; use POST with a JSON body", "other",
                   headers={"Allow": "POST"})


@router.api_route("/api/v1/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
async def unknown_endpoint(rest: str) -> Response:
    raise ApiError(404, f"no API endpoint /api/v1/{rest}; see /api/docs", "other")


@router.get("/healthz")
async def healthz(request: Request) -> JSONResponse:
    """Liveness plus what operators need: warm-up state, KB size, log backlog, LLM load and breaker."""
    warm = request.app.state.warm
    body: dict[str, Any] = {"status": "starting", "ready": bool(warm.get("ready")),
                            "problems": list(warm.get("problems", []))}
    runtime = getattr(request.app.state, "runtime", None)
    if body["ready"] and runtime is not None:
        try:
            status = await run_in_threadpool(runtime.status)
            body["problems"] += status.pop("problems", [])
            body.update(status)
        except Exception as exc:  # health must answer even when a part is broken; it reports, never raises
            body["problems"].append(f"service status failed: {exc.__class__.__name__}: {exc}")
        body["status"] = "degraded" if body["problems"] or body.get("log_backlog") else "ok"
    elif body["ready"]:
        body["status"] = "degraded"
    return JSONResponse(body)


@router.get("/metrics")
async def metrics() -> Response:
    """Prometheus metrics: open on loopback, else with any valid key (app.server's OperatorPages)."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
