"""HTTP API: `POST /api/v1/chat`, `POST /api/v1/feedback`, `GET /healthz`, `GET /metrics`.

Every error is JSON ``{"error": "..."}`` with a 4xx status; bad input never produces a 500. Bodies
are parsed here rather than by FastAPI's validation so the router keeps that promise wherever it is
mounted. Model calls run in the threadpool so the event loop keeps serving the UI.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, generate_latest
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.api_schema import MAX_BODY_BYTES, ChatIn, ErrorOut, FeedbackIn, FeedbackOut, explain
from chains.schema import ChatRequest, ChatResponse
from tandem.errors import TandemError
from tandem.settings import get_settings

router = APIRouter()


def _counter(name: str, documentation: str, labels: list[str]) -> Counter:
    # The module may be imported twice in one process (tests); a second registration would raise.
    existing = REGISTRY._names_to_collectors.get(name) or REGISTRY._names_to_collectors.get(f"{name}_total")
    return existing if existing is not None else Counter(name, documentation, labelnames=labels)


API_RESPONSES = _counter("tandem_api_responses", "HTTP API responses by endpoint and status code.",
                         ["endpoint", "status"])

# Guard refusals that mean "the client sent something unusable" map to 4xx; the guard's own
# message is the error text. Any other guard answer (e.g. an internal-error apology) stays 200.
GUARD_STATUS = {"guard: too long": 413, "guard: empty": 422, "guard: only control characters": 422,
                "guard: rate limited": 429}


def error(status: int, message: str, endpoint: str, headers: dict[str, str] | None = None,
          **extra: Any) -> JSONResponse:
    API_RESPONSES.labels(endpoint=endpoint, status=str(status)).inc()
    body = ErrorOut(error=message, **extra).model_dump(exclude_none=True)
    return JSONResponse(body, status_code=status, headers=headers)


def _unauthorised(request: Request, endpoint: str) -> JSONResponse | None:
    """None when no token is configured or the right one was sent; else the 401 to return."""
    token = get_settings().api_token
    if not token:
        return None
    scheme, _, sent = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode()):
        return None
    return error(401, "missing or wrong API token; send the header 'Authorization: Bearer <token>'",
                 endpoint, headers={"WWW-Authenticate": "Bearer"})


async def _json_body(request: Request, model, endpoint: str):
    """(parsed model, None) or (None, error response)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None, error(413, f"request body is larger than {MAX_BODY_BYTES // 1000} kB", endpoint)
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        return None, error(413, f"request body is larger than {MAX_BODY_BYTES // 1000} kB", endpoint)
    if not raw.strip():
        return None, error(400, 'empty request body; send JSON like {"message": "where is my order?"}', endpoint)
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        return None, error(400, "request body is not UTF-8 text", endpoint)
    except json.JSONDecodeError as exc:
        return None, error(400, f"request body is not valid JSON ({exc.msg} at line {exc.lineno} "
                                f"column {exc.colno})", endpoint)
    except (RecursionError, ValueError):  # nesting deeper than the parser's stack, or a 5000-digit number
        return None, error(400, "request body is not usable JSON (nested too deeply or a number too long)",
                           endpoint)
    if not isinstance(data, dict):
        return None, error(422, "request body must be a JSON object", endpoint)
    try:
        return model.model_validate(data), None
    except ValidationError as exc:
        return None, error(422, explain(exc), endpoint)


async def _service():
    from chains.service import get_service

    return await run_in_threadpool(get_service)


@router.post("/api/v1/chat")
async def chat(request: Request) -> Response:
    endpoint = "chat"
    if (denied := _unauthorised(request, endpoint)) is not None:
        return denied
    body, problem = await _json_body(request, ChatIn, endpoint)
    if problem is not None:
        return problem
    try:
        svc = await _service()
    except TandemError as exc:
        return error(503, f"the assistant is not available: {exc}", endpoint)
    chat_request = ChatRequest(message=body.message, session_id=body.session_id, user_id=body.user_id,
                               channel="api", modality="text")
    response: ChatResponse = await run_in_threadpool(svc.answer, chat_request)
    status = status_for(response)
    if status != 200:
        return error(status, response.answer, endpoint, request_id=response.request_id,
                     session_id=response.session_id)
    API_RESPONSES.labels(endpoint=endpoint, status="200").inc()
    return JSONResponse(response.public())


def status_for(response: ChatResponse) -> int:
    if response.route != "guard":
        return 200
    return next((GUARD_STATUS[r] for r in response.reasons if r in GUARD_STATUS), 200)


@router.post("/api/v1/feedback")
async def feedback(request: Request) -> Response:
    endpoint = "feedback"
    if (denied := _unauthorised(request, endpoint)) is not None:
        return denied
    body, problem = await _json_body(request, FeedbackIn, endpoint)
    if problem is not None:
        return problem
    if not await run_in_threadpool(_request_exists, body.request_id):
        return error(404, f"no answer with request_id '{body.request_id}'", endpoint)
    svc = await _service()
    await run_in_threadpool(svc.feedback, body.request_id, body.rating, body.comment, body.user_id)
    API_RESPONSES.labels(endpoint=endpoint, status="200").inc()
    return JSONResponse(FeedbackOut(request_id=body.request_id).model_dump())


def _request_exists(request_id: str) -> bool:
    from storage.db import session_scope
    from storage.tables import RequestLog

    with session_scope() as session:
        return session.get(RequestLog, request_id) is not None


@router.api_route("/api/v1/chat", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
@router.api_route("/api/v1/feedback", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def wrong_method(request: Request) -> Response:
    # Without this the Gradio app mounted at "/" would answer these with an HTML 404.
    return error(405, f"{request.method} is not supported here; use POST with a JSON body", "other",
                 headers={"Allow": "POST"})


@router.api_route("/api/v1/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
async def unknown_endpoint(rest: str) -> Response:
    return error(404, f"no API endpoint /api/v1/{rest}; see /api/docs", "other")


@router.get("/healthz")
async def healthz(request: Request) -> Response:
    """Liveness plus what operators need: warm-up state, KB size, log backlog, LLM load and breaker."""
    warm = getattr(request.app.state, "warm", None) or {"ready": False, "problems": []}
    body: dict[str, Any] = {"status": "starting", "ready": bool(warm.get("ready")),
                            "problems": list(warm.get("problems", []))}
    if body["ready"]:
        from chains.service import get_service

        try:
            body.update(await run_in_threadpool(lambda: get_service().status()))
        except Exception as exc:  # health must answer even when a part is broken; it reports, never raises
            body["problems"].append(f"service status failed: {exc.__class__.__name__}: {exc}")
        body["status"] = "degraded" if body["problems"] or body.get("log_backlog") else "ok"
    return JSONResponse(body)


@router.get("/metrics")
async def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
