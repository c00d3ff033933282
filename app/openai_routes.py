"""OpenAI-compatible routes: `GET /v1/models` and `POST /v1/chat/completions` (point any OpenAI client here)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.openai_protocol import (
    MODELS,
    OPENAI_ERROR_RESPONSES,
    ChatCompletion,
    ChatCompletionRequest,
    ModelCard,
    ModelList,
    openai_error,
)
from app.openai_serving import CHANNEL, OpenAIServing, Refusal
from app.routes import bearer_ok
from chains.schema import ChatRequest

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])


def _denied(request: Request) -> Response | None:
    if bearer_ok(request, request.app.state.settings.api_token):
        return None
    return openai_error(401, "Incorrect API key provided. Send 'Authorization: Bearer <TANDEM_API_TOKEN>'.",
                        headers={"WWW-Authenticate": "Bearer"})


@router.get("/models", response_model=ModelList, responses=OPENAI_ERROR_RESPONSES)
async def models(request: Request) -> Any:
    """The three ways to call Tandem: routed, knowledge-base tier only, LLM tier only."""
    if (denied := _denied(request)) is not None:
        return denied
    return ModelList(data=[ModelCard(id=name, description=text) for name, text in MODELS.items()])


@router.post("/chat/completions", response_model=ChatCompletion, responses=OPENAI_ERROR_RESPONSES)
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Any:
    """OpenAI Chat Completions. The route shows in the headers `x-tandem-route`, `x-tandem-request-id` and
    `x-tandem-degraded`, and in a `tandem` object of the body (and of the final chunk when streaming)."""
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is None:
        problems = request.app.state.warm.get("problems") or ["still starting"]
        return openai_error(503, f"the assistant is not available: {'; '.join(problems)}")
    serving = OpenAIServing(runtime, request.app.state.media)
    try:
        if _denied(request) is not None:
            raise Refusal(401, "Incorrect API key provided. Send 'Authorization: Bearer <TANDEM_API_TOKEN>'.",
                          headers={"WWW-Authenticate": "Bearer"})
        serving.check(body)
    except Refusal as refusal:
        last = body.messages[-1]
        serving.log_refusal(ChatRequest(message=last.content if isinstance(last.content, str) else "",
                                        user_id=(body.user or "") if refusal.status != 401 else "",
                                        channel=CHANNEL), refusal)
        return refusal.response()
    if body.stream:
        return await serving.stream(body)
    return await serving.complete(body)


@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def unknown(rest: str) -> JSONResponse:
    return openai_error(404, f"Unknown endpoint /v1/{rest}. Tandem serves GET /v1/models and "
                             "POST /v1/chat/completions.", code="unknown_url")
