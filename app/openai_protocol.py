"""OpenAI Chat Completions, as Tandem speaks it: request and response models, and OpenAI's error shape.

Only what a customer-service model can honour is accepted. Features Tandem cannot provide (tools, n > 1,
logprobs) are refused with a 400 that names the parameter, rather than silently ignored.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from chains.schema import MAX_ANSWER_TOKENS

MODELS: dict[str, str] = {
    "tandem": "routed: the router sends each message to the knowledge-base tier or the LLM (the normal path)",
    "tandem-small": "the knowledge-base tier only; a notice says so when no answer fits well",
    "tandem-llm": "the LLM tier only, still through the guard, the cache rules, the order tool and the log",
}
MODES = {"tandem": "routed", "tandem-small": "small", "tandem-llm": "llm"}
# Parameters with no honest meaning here: refused (400) so that a client never believes they took effect.
UNSUPPORTED = ("tools", "tool_choice", "functions", "function_call", "logprobs", "top_logprobs", "audio",
               "modalities", "prediction", "response_format")


class ImageUrl(BaseModel):
    url: str
    detail: str | None = None


class InputAudio(BaseModel):
    data: str
    # A file suffix, never a path: "x/y" once reached the temporary file's name and failed with a 500.
    format: str = Field("wav", pattern=r"^[A-Za-z0-9]{1,10}$")


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text", "image_url", "input_audio"]
    text: str | None = None
    image_url: ImageUrl | None = None
    input_audio: InputAudio | None = None


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [
        {"model": "tandem", "messages": [{"role": "user", "content": "How do I reset my password?"}]}]})

    model: str
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1, le=MAX_ANSWER_TOKENS)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_ANSWER_TOKENS)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = None
    n: int | None = None
    user: str | None = Field(None, max_length=128, description="A label for logs. The customer's identity comes only "
                             "from the signed X-Tandem-Customer header.")
    # Tandem's own (an SDK sends it as extra_body): a clicked suggested reply.
    suggestion: str = Field("", max_length=200, description="One of tandem.suggestions' answer_id, clicked: answered "
                            "from that help-center answer at once (send its title as the last user message).")

    def unsupported(self) -> str | None:
        """The first parameter that Tandem refuses, or None."""
        extra = self.model_extra or {}
        for name in UNSUPPORTED:
            value = extra.get(name)
            if value not in (None, False, [], {}) and not (name == "response_format" and _is_text_format(value)):
                return name
        if self.n not in (None, 1):
            return "n"
        return None


def _is_text_format(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "text"


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "tandem"
    description: str = ""


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "length"] = "stop"


class TandemInfo(BaseModel):
    """Why this answer: not part of OpenAI's schema, so strict clients ignore it."""

    route: str
    served: str = ""  # what the answer is: e.g. route llm, served human_offer (chains.schema.AnswerBadge)
    request_id: str
    degraded: bool = False
    fallback: bool = False
    sources: list[dict[str, Any]] = Field(default_factory=list)
    # A catalog answer (route catalog): the product cards and the filter chips, as on /api/v1 (chains.schema.AnswerBadge)
    products: list[dict[str, Any]] = Field(default_factory=list)
    filters: list[dict[str, Any]] = Field(default_factory=list)
    intent: str = ""  # a product message's kind: search, fact, compare, stock, photo, mixed, advice (AnswerBadge)
    suggestions: list[dict[str, Any]] | None = None  # predicted follow-ups: reply with `suggestion` (and its title)
    reason: str = ""
    scores: dict[str, float] | None = None   # admin keys only (operators)
    reasons: list[str] | None = None         # admin keys only


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[Choice]
    usage: Usage
    tandem: TandemInfo


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "length"] | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    tandem: TandemInfo | None = None


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


# status -> (type, code), as OpenAI's own API uses them; the SDKs map the status to their exception class.
_ERROR_KINDS = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
                404: ("invalid_request_error", "model_not_found"), 405: ("invalid_request_error", None),
                413: ("invalid_request_error", "request_too_large"), 422: ("invalid_request_error", None),
                429: ("requests", "rate_limit_exceeded"), 503: ("server_error", "service_unavailable"),
                500: ("server_error", None)}


def openai_error(status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> JSONResponse:
    kind, default_code = _ERROR_KINDS.get(status, ("invalid_request_error", None))
    body = ErrorResponse(error=ErrorDetail(message=message, type=kind, param=param, code=code or default_code))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


OPENAI_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text} for code, text in (
        (400, "malformed body, unsupported parameter, or an unusable message"), (401, "wrong bearer token"),
        (404, "unknown model"), (429, "rate limited (see Retry-After)"), (503, "the assistant is not available"))}
