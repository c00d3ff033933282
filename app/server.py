"""The web app: the HTTP API and health/metrics routes, with the Gradio chat mounted at ``/``.

Start-up loads every model (MiniLM, knowledge base, router, OCR, Whisper) before the port accepts
requests, so the first customer does not wait; a part that fails to load is reported by /healthz
and the app still starts (the chat then answers with the fallback it can give).
"""

from __future__ import annotations

import contextlib
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from tandem.settings import get_settings

log = logging.getLogger("tandem.app")

# Gradio refuses bigger uploads outright (nothing is logged). It sits well above max_upload_mb so
# that an ordinary oversize file reaches app.media, which explains the limit and logs the message.
HARD_UPLOAD_FACTOR = 5


def warm_up() -> dict:
    """Load the service and the media models; returns {"ready", "problems"} for /healthz."""
    from app import media
    from tandem.errors import TandemError

    problems: list[str] = []
    try:
        from chains.service import get_service

        get_service()
    except TandemError as exc:
        problems.append(str(exc))
    problems += media.warm_up()
    for problem in problems:
        log.warning("warm-up: %s", problem)
    return {"ready": True, "problems": problems}


def create_app(warm: bool = True) -> FastAPI:
    import gradio as gr

    from app.api import router
    from app.ui import CSS, build_ui, theme

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.warm = (await run_in_threadpool(warm_up)) if warm else {"ready": True, "problems": []}
        yield

    app = FastAPI(title="Tandem chat API", lifespan=lifespan, docs_url="/api/docs", redoc_url=None,
                  openapi_url="/api/openapi.json")
    app.state.warm = {"ready": False, "problems": []}
    app.include_router(router)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": "; ".join(str(e.get("msg")) for e in exc.errors())}, status_code=422)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse({"error": "internal error; it has been logged"}, status_code=500)

    settings = get_settings()
    blocks = build_ui()
    blocks.queue(default_concurrency_limit=32)
    hard_limit_mb = max(50, int(settings.max_upload_mb * HARD_UPLOAD_FACTOR))
    return gr.mount_gradio_app(app, blocks, path="/", theme=theme(), css=CSS, footer_links=[],
                               max_file_size=f"{hard_limit_mb}mb", show_error=True)


def serve(host: str | None = None, port: int | None = None) -> None:
    import uvicorn

    settings = get_settings()
    uvicorn.run(create_app(), host=host or settings.host, port=port or settings.app_port, log_level="info",
                timeout_graceful_shutdown=5)
