"""OpenAI-compatible routes: `GET /v1/models` and `POST /v1/chat/completions` (point any OpenAI client here)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.access import Caller
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
from app.routes import caller_of
from app.serving import OPENAI_REFUSAL_STATUS, available_runtime, over_limit
from chains.ratelimit import retry_after_s
from chains.schema import ChatRequest

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])


@router.get("/models", response_model=ModelList, responses=OPENAI_ERROR_RESPONSES, dependencies=[Depends(caller_of)])
async def models() -> Any:
    """The three ways to call Tandem: routed, knowledge-base tier only, LLM tier only."""
    return ModelList(data=[ModelCard(id=name, description=text) for name, text in MODELS.items()])


@router.post("/chat/completions", response_model=ChatCompletion, responses=OPENAI_ERROR_RESPONSES)
async def chat_completions(body: ChatCompletionRequest, request: Request, caller: Caller = Depends(caller_of)) -> Any:
    """OpenAI Chat Completions. The route shows in the headers `x-tandem-route`, `x-tandem-request-id` and
    `x-tandem-degraded`, and in a `tandem` object of the body (and of the final chunk when streaming)."""
    runtime = available_runtime(request.app.state)
    serving = OpenAIServing(runtime, request.app.state.media, caller)
    last = body.messages[-1]
    logged = ChatRequest(message=last.content if isinstance(last.content, str) else "", user_id=body.user or "",
                         customer=caller.customer, client=caller.client, channel=CHANNEL)
    try:
        serving.check(body, request.app.state.settings.max_answer_tokens)
        if (refused := await run_in_threadpool(over_limit, runtime, caller.limit_keys, logged)) is not None:
            return openai_error(OPENAI_REFUSAL_STATUS["rate_limited"], refused.answer,
                                headers={"Retry-After": str(retry_after_s(refused.answer))})
    except Refusal as refusal:
        await run_in_threadpool(serving.log_refusal, logged, refusal)
        return refusal.response()
    if body.stream:
        return await serving.stream(body)
    return await serving.complete(body)


@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def unknown(rest: str) -> JSONResponse:
    return openai_error(404, f"Unknown endpoint /v1/{rest}. Tandem serves GET /v1/models and "
                             "POST /v1/chat/completions.", code="unknown_url")
