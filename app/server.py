"""The web app: the HTTP API and health/metrics routes, with the Gradio chat mounted at ``/``.

Start-up builds the runtime (encoder, knowledge base, router, LLM client) and loads OCR and Whisper before
the port accepts requests, so the first customer does not wait. A part that fails to load is reported by
/healthz and the app still starts: text chat works without OCR or Whisper, and API calls answer 503 with
the reason when the runtime itself could not be built.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.access import AccessDenied, Gate
from app.media import MediaReader
from app.protocol import MAX_BODY_BYTES, explain
from app.routes import API_RESPONSES, ApiError, router
from app.serving import Unavailable, available_runtime
from chains.handoff_stats import expose
from chains.runtime import Runtime, build_runtime
from chains.schema import ChatRequest
from core.errors import TandemError
from core.exposure import app_exposure_problem, is_loopback
from core.settings import Settings, get_settings

log = logging.getLogger("tandem.app")

# Gradio refuses bigger uploads outright (nothing is logged). It sits well above max_upload_mb so
# that an ordinary oversize file reaches app.media, which explains the limit and logs the message.
HARD_UPLOAD_FACTOR = 5
API_PREFIXES = ("/api/", "/v1/")
# Operators' pages: open on loopback, else they need a key (app.access.Gate.open_to).
OPERATOR_PATHS = ("/metrics", "/api/docs", "/api/openapi.json")
# Refused calls to these are logged as request rows, like every other bad request.
CHAT_PATHS = ("/api/v1/chat", "/v1/chat/completions")
# An oversize body up to this size is read and dropped before the 413 goes out (see BodyLimit); a bigger one is
# refused at once, and the client may see the connection close instead.
DRAIN_LIMIT_BYTES = 64 * 1024 * 1024


class BodyLimit:
    """Refuse API bodies over MAX_BODY_BYTES before anything parses them (declared or streamed)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIXES):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            if int(declared) <= DRAIN_LIMIT_BYTES:
                await _drain(receive)  # answering before the client has sent its body resets the connection
            await self._refuse(scope, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge()
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await _drain(receive)
            await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        message = f"request body is larger than {self.limit // 1000} kB"
        await error_response(scope["path"], 413, message)(scope, _no_body, send)


class _TooLarge(Exception):
    pass


async def _drain(receive: Receive, limit: int = DRAIN_LIMIT_BYTES) -> None:
    """Read and drop the rest of a request body (up to ``limit``), so that the client, still sending it, gets to
    read the refusal."""
    read = 0
    while read <= limit:
        message = await receive()
        read += len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def error_response(path: str, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """Tandem's error shape; the OpenAI endpoint (under /v1) answers in OpenAI's."""
    if path.startswith("/v1/"):
        from app.openai_protocol import openai_error

        # OpenAI answers a body it cannot use with 400 (its SDKs raise BadRequestError), not 422.
        return openai_error(400 if status == 422 else status, message, headers=headers)
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _validation_message(errors: list[dict[str, Any]]) -> tuple[int, str]:
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "")
        return 400, f"request body is not valid JSON{f' ({detail})' if detail else ''}"
    if first.get("type") == "missing" and tuple(first.get("loc", ())) == ("body",):
        return 400, 'empty request body; send JSON like {"message": "where is my order?"}'
    return 422, explain(errors)


def create_app(settings: Settings | None = None, runtime_factory: Callable[[], Runtime] | None = None,
               media: MediaReader | None = None, warm: bool = True) -> FastAPI:
    """The whole web app: the APIs of :func:`create_api` with the Gradio chat mounted at ``/``."""
    import gradio as gr

    from app.ui import CSS, build_ui, theme

    settings = settings or get_settings()
    media = media or MediaReader(settings)
    app = create_api(settings, runtime_factory, media, warm)
    blocks = build_ui(lambda: available_runtime(app.state), media, app.state.gate, settings.shop_name)
    blocks.queue(default_concurrency_limit=32)
    hard_limit_mb = max(50, int(settings.max_upload_mb * HARD_UPLOAD_FACTOR))
    return gr.mount_gradio_app(app, blocks, path="/", theme=theme(), css=CSS, footer_links=[],
                               max_file_size=f"{hard_limit_mb}mb", show_error=True)


def create_api(settings: Settings | None = None, runtime_factory: Callable[[], Runtime] | None = None,
               media: MediaReader | None = None, warm: bool = True) -> FastAPI:
    """The HTTP APIs (Tandem's /api/v1, OpenAI's /v1, /healthz, /metrics) over one runtime built at start-up.

    ``runtime_factory`` builds the runtime (default: from ``settings``); ``warm`` also loads OCR and Whisper.
    """
    from app.inbox_routes import router as inbox_router
    from app.openai_routes import router as openai_router

    settings = settings or get_settings()
    media = media or MediaReader(settings)

    def start() -> dict:
        problems: list[str] = []
        try:
            app.state.runtime = (runtime_factory or (lambda: build_runtime(settings)))()
            app.state.runtime.chain.quality_floors()  # the KB's draft-quality floors, before the first customer
        except TandemError as exc:
            problems.append(str(exc))
        # /metrics: the handoff numbers of the stored events (time to pick up, to the first human reply, ...)
        expose(lambda: app.state.runtime.db if app.state.runtime is not None else None)
        if app.state.runtime is not None and app.state.runtime.catalog is not None:
            try:  # the product catalog's index too, when one was ingested (each message checks it again)
                app.state.runtime.catalog.current()
            except Exception as exc:  # noqa: BLE001  (product messages then go to the help center and the LLM)
                problems.append(f"the product catalog could not be read: {exc.__class__.__name__}: {exc}"[:300])
        if warm:
            problems += media.warm_up()
        for problem in problems:
            log.warning("warm-up: %s", problem)
        return {"ready": True, "problems": problems}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        from ops.job import OpsLoop
        from ops.prepared import PreparedWorker

        app.state.warm = await run_in_threadpool(start)
        runtime = app.state.runtime
        # The ops autopilot (alerts, automatic tuning) rides along in the app; a database lease keeps it to one
        # process when several replicas run. TANDEM_OPS_EVERY_MIN=0 turns it off here (cron `tandem ops run`).
        ops = OpsLoop(runtime.db, settings.ops_every_min, settings.retention_days, settings.alert_webhook,
                      settings.llm_price_per_1k_tokens).start() if runtime is not None else None
        app.state.ops = ops
        # Answers to recurring LLM-bound questions prepared while the LLM engine is idle (ops/prepared.py): off
        # unless TANDEM_PREPARE_TOKENS_PER_HOUR gives it a budget; a lease row keeps it to one replica.
        prepared = PreparedWorker(runtime.service, settings.prepare_tokens_per_hour,
                                  every_s=settings.prepare_every_s).start() if runtime is not None else None
        app.state.prepared = prepared
        yield
        if prepared is not None:
            prepared.stop()
        if ops is not None:
            ops.stop()
        if runtime is not None:
            runtime.close()

    app = FastAPI(title="Tandem chat API", lifespan=lifespan, docs_url="/api/docs", redoc_url=None,
                  openapi_url="/api/openapi.json",
                  description="Customer-service answers routed between a knowledge-base tier and an LLM. "
                              "`/api/v1` is Tandem's own API; `/v1` speaks OpenAI's Chat Completions.")
    app.state.settings = settings
    app.state.media = media
    app.state.runtime = None
    app.state.warm = {"ready": False, "problems": []}
    app.state.gate = Gate(settings, lambda: app.state.runtime.db if app.state.runtime is not None else None)
    app.include_router(inbox_router)  # before the API's catch-all for unknown /api/v1 paths
    app.include_router(router)
    app.include_router(openai_router)
    app.add_middleware(BodyLimit)

    _answer_refusals_and_errors(app)
    return app


def _answer_refusals_and_errors(app: FastAPI) -> None:
    """Operators' pages behind the gate, and every refusal or error answered in the shape of the path's API (bad
    input never a 500)."""
    @app.middleware("http")
    async def _operator_pages(request: Request, call_next):
        if request.url.path in OPERATOR_PATHS:
            try:
                if not app.state.gate.open_to(peer=request.client.host if request.client else "",
                                              headers=request.headers):
                    raise AccessDenied(401, "this page is open on loopback only, or with an API key")
            except AccessDenied as exc:
                return error_response(request.url.path, exc.status, exc.message, headers=exc.headers)
        return await call_next(request)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(Unavailable)
    async def _unavailable(request: Request, exc: Unavailable) -> JSONResponse:
        if not request.url.path.startswith("/v1/"):
            API_RESPONSES.labels(endpoint="other", status="503").inc()  # Tandem's API counts its error answers
        return error_response(request.url.path, 503, str(exc))

    @app.exception_handler(AccessDenied)
    async def _denied(request: Request, exc: AccessDenied) -> JSONResponse:
        runtime = app.state.runtime
        if runtime is not None and request.url.path in CHAT_PATHS:  # every refused message is a row operators see
            channel = "openai" if request.url.path.startswith("/v1/") else "api"
            await run_in_threadpool(runtime.service.log_refusal, ChatRequest(message="", channel=channel),
                                    f"refused: {exc.status} {exc.message}")
        return error_response(request.url.path, exc.status, exc.message, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, message = _validation_message(list(exc.errors()))
        return error_response(request.url.path, status, message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 400 and "parsing the body" in message:
            # FastAPI's words for a body that is not UTF-8 or not decodable JSON (too deep, too long a number)
            message = "request body is not UTF-8 text or not usable JSON (nested too deeply or a number too long)"
        return error_response(request.url.path, exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(request.url.path, 500, "internal error; it has been logged")


# An idle keep-alive connection is closed by the side whose timeout ends first. uvicorn's default, 5 s, equals
# httpx's (and so the OpenAI SDK's) pool expiry and is far below nginx's upstream 60 s: a client could send its
# next request on a connection the app was closing at that moment, and get "connection reset" (a CI run's bad-input
# test did, between two batches). The server outlasts its clients, so they are the ones that close.
KEEP_ALIVE_S = 75


def serve(settings: Settings | None = None, host: str | None = None, port: int | None = None) -> None:
    import uvicorn

    settings = settings or get_settings()
    host = host or settings.host
    refuse_if_exposed(settings, host)
    uvicorn.run(create_app(settings), host=host, port=port or settings.app_port,
                log_level="info", timeout_graceful_shutdown=5, timeout_keep_alive=KEEP_ALIVE_S)


def refuse_if_exposed(settings: Settings, host: str) -> None:
    """Refuse (one line naming the setting) to listen beyond loopback without an API key: TANDEM_API_TOKEN, or a key
    `tandem keys create` made that is not revoked. Loopback needs no database read."""
    if is_loopback(host) or settings.api_token:
        return
    from storage.api_keys import active_key_count
    from storage.db import open_database

    if problem := app_exposure_problem(host, active_key_count(open_database(settings.db_url).init()) > 0):
        raise TandemError(problem)
