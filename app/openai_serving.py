"""Serving OpenAI Chat Completions over Tandem's service: request to ChatRequest, answer to completion or chunks.

The last user message is the message; earlier user and assistant turns are the conversation history the
follow-up logic uses; ``user`` is the customer. Image parts (``image_url`` with a data URL) and audio parts
(``input_audio``) go through the same OCR and speech path as the chat UI. Every call, refused or answered,
is one request row with channel ``openai``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.access import Caller
from app.media import AttachmentError, MediaReader
from app.openai_protocol import (
    MODES,
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatMessageIn,
    Choice,
    ChunkChoice,
    Delta,
    TandemInfo,
    Usage,
    openai_error,
)
from app.serving import OPENAI_REFUSAL_STATUS, refusal_status, stream_async
from chains.ratelimit import retry_after_s
from chains.runtime import Runtime
from chains.schema import ChatRequest, ChatResponse, Decided, Revised

CHANNEL = "openai"
IMAGE_SUFFIX = {"image/png": ".png", "image/jpeg": ".jpg", "image/jpg": ".jpg", "image/webp": ".webp",
                "image/gif": ".gif", "image/bmp": ".bmp"}


class Refusal(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers

    def response(self) -> JSONResponse:
        return openai_error(self.status, self.message, param=self.param, headers=self.headers)


MAX_HISTORY_MESSAGES = 40   # earlier messages kept from an OpenAI request (the prompt keeps what fits its budget)
MAX_HISTORY_CHARS = 2000    # characters kept of each


class OpenAIServing:
    def __init__(self, runtime: Runtime, media: MediaReader, caller: Caller):
        self.runtime = runtime
        self.media = media
        self.caller = caller

    # --- request -----------------------------------------------------------------------------------
    def check(self, body: ChatCompletionRequest, max_answer_tokens: int) -> None:
        if body.model not in MODES:
            raise Refusal(404, f"The model '{body.model}' does not exist. Use one of: {', '.join(MODES)} "
                               "(GET /v1/models).", param="model")
        if (name := body.unsupported()) is not None:
            raise Refusal(400, f"'{name}' is not supported by Tandem (a customer-service model answers in text, "
                               "one choice per request).", param=name)
        asked = body.max_completion_tokens or body.max_tokens
        if asked is not None and asked > max_answer_tokens:
            raise Refusal(400, f"max_tokens is {asked}; this deployment answers with at most {max_answer_tokens} "
                               "tokens (TANDEM_MAX_ANSWER_TOKENS).", param="max_tokens")
        if body.messages[-1].role != "user":
            raise Refusal(400, "the last message must come from the user (role 'user')", param="messages")

    def to_request(self, body: ChatCompletionRequest) -> ChatRequest:
        """The ChatRequest for a checked body (reads attachments: call it off the event loop)."""
        last = body.messages[-1]
        text, files, errors = self._parts(last)
        extracted, photos, unread = self.media.read_and_delete(files)
        errors += unread
        # Capped: an OpenAI client writes the whole history itself, and a prompt holds only the turns its budget fits.
        history = [{"role": m.role, "content": _text_of(m)[:MAX_HISTORY_CHARS]} for m in body.messages[:-1]
                   if m.role in ("user", "assistant") and _text_of(m)][-MAX_HISTORY_MESSAGES:]
        kinds = (["text"] if text.strip() else []) + (["attachment"] if files else [])
        return ChatRequest(message=text, session_id=_conversation_id(body, self.caller.customer or self.caller.client),
                           user_id=body.user or "", customer=self.caller.customer, client=self.caller.client,
                           channel=CHANNEL, modality="+".join(kinds) or "text", extracted=extracted,
                           attachment_errors=errors, photos=photos, mode=MODES[body.model], history=history,
                           max_tokens=body.max_completion_tokens or body.max_tokens, temperature=body.temperature,
                           suggestion=body.suggestion)

    def _parts(self, message: ChatMessageIn) -> tuple[str, list[str], list[str]]:
        if isinstance(message.content, str) or message.content is None:
            return message.content or "", [], []
        texts, files, errors = [], [], []
        for part in message.content:
            if part.type == "text" and part.text:
                texts.append(part.text)
            elif part.type == "image_url" and part.image_url is not None:
                try:
                    files.append(data_url_file(part.image_url.url))
                except AttachmentError as exc:
                    errors.append(str(exc))
            elif part.type == "input_audio" and part.input_audio is not None:
                try:
                    files.append(_bytes_file(base64.b64decode(part.input_audio.data, validate=True),
                                             "." + part.input_audio.format.strip(".").lower()))
                except (binascii.Error, ValueError):
                    errors.append("The audio part is not valid base64; please send the recording again.")
        return "\n".join(texts), files, errors

    def log_refusal(self, request: ChatRequest, refusal: Refusal) -> None:
        self.runtime.service.log_refusal(request, f"refused: {refusal.status} {refusal.message}")

    # --- response ----------------------------------------------------------------------------------
    async def complete(self, body: ChatCompletionRequest) -> JSONResponse:
        request = await run_in_threadpool(self.to_request, body)
        response: ChatResponse = await run_in_threadpool(self.runtime.service.answer, request)
        if (refusal := self._refusal_for(response)) is not None:
            return refusal.response()
        completion = ChatCompletion(
            id=f"chatcmpl-{response.request_id}", model=body.model,
            choices=[Choice(message=AssistantMessage(content=response.answer),
                            finish_reason="length" if response.finish_reason == "length" else "stop")],
            usage=_usage(response), tandem=_info(response, self.caller.operator))
        return JSONResponse(completion.model_dump(exclude_none=True), headers=_headers(response.route, response.request_id,
                                                                      response.degraded))

    async def stream(self, body: ChatCompletionRequest) -> JSONResponse | StreamingResponse:
        request = await run_in_threadpool(self.to_request, body)
        items = stream_async(self.runtime.service, request, threading.Event())
        first = await anext(items)
        if isinstance(first, Decided) and first.route == "guard":
            final = [item async for item in items if isinstance(item, ChatResponse)]
            if final and (refusal := self._refusal_for(final[0])) is not None:
                return refusal.response()
            return StreamingResponse(self._chunks(body, _replay(first, final), request), media_type="text/event-stream",
                                     headers=_headers("guard", first.request_id, False))
        if not isinstance(first, Decided):  # an internal fault before routing: the service still answered
            return StreamingResponse(self._chunks(body, _prepend(first, items), request),
                                     media_type="text/event-stream")
        return StreamingResponse(self._chunks(body, _prepend(first, items), request), media_type="text/event-stream",
                                 headers=_headers(first.route, first.request_id, first.degraded))

    async def _chunks(self, body: ChatCompletionRequest, items: AsyncIterator[Any],
                      request: ChatRequest) -> AsyncIterator[str]:
        created = int(time.time())
        chunk_id = "chatcmpl-"
        started = False
        held = False  # a draft that a rewrite may replace: an OpenAI stream cannot take text back, so it waits
        async for item in items:
            if isinstance(item, Decided):
                chunk_id = f"chatcmpl-{item.request_id}"
                held = item.revisable
                continue
            if isinstance(item, ChatResponse):
                chunk_id = f"chatcmpl-{item.request_id}"
                if not started:
                    yield _sse(_chunk(chunk_id, created, body.model, Delta(role="assistant", content="")))
                if held:
                    yield _sse(_chunk(chunk_id, created, body.model, Delta(content=item.answer)))
                finish = "length" if item.finish_reason == "length" else "stop"
                yield _sse(ChatCompletionChunk(id=chunk_id, created=created, model=body.model,
                                               choices=[ChunkChoice(delta=Delta(), finish_reason=finish)],
                                               tandem=_info(item, self.caller.operator)))
                if body.stream_options is not None and body.stream_options.include_usage:
                    yield _sse(ChatCompletionChunk(id=chunk_id, created=created, model=body.model, choices=[],
                                                   usage=_usage(item)))
                continue
            if held and isinstance(item, (str, Revised)):
                continue
            if isinstance(item, Revised):  # the text shown so far stays on the client's screen; this follows it
                item = ("\n\n" if started else "") + item.text
            if isinstance(item, Exception):
                item = "Sorry, something went wrong on our side. Please try again."
            if not started:
                started = True
                yield _sse(_chunk(chunk_id, created, body.model, Delta(role="assistant", content="")))
            yield _sse(_chunk(chunk_id, created, body.model, Delta(content=item)))
        yield "data: [DONE]\n\n"

    @staticmethod
    def _refusal_for(response: ChatResponse) -> Refusal | None:
        # Guard outcomes that are the client's fault: OpenAI clients expect an HTTP error, not a chat answer.
        status = refusal_status(response, OPENAI_REFUSAL_STATUS)
        if status is None:
            return None
        headers = _headers("guard", response.request_id, False)  # it reached the chain: its row is findable
        if status == 429:
            headers["Retry-After"] = str(retry_after_s(response.answer))
        return Refusal(status, response.answer, param="messages" if status == 400 else None, headers=headers)


async def _prepend(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for item in rest:
        yield item


async def _replay(first: Any, rest: list[Any]) -> AsyncIterator[Any]:
    yield first
    for item in rest:
        yield item


def _chunk(chunk_id: str, created: int, model: str, delta: Delta) -> ChatCompletionChunk:
    return ChatCompletionChunk(id=chunk_id, created=created, model=model, choices=[ChunkChoice(delta=delta)])


def _sse(chunk: ChatCompletionChunk) -> str:
    return f"data: {json.dumps(chunk.model_dump(exclude_none=True), ensure_ascii=False)}\n\n"


def _usage(response: ChatResponse) -> Usage:
    # Answers of the knowledge-base tier, the cache and the order tool use no model tokens: 0 and 0.
    return Usage(prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                 total_tokens=response.prompt_tokens + response.completion_tokens)


def _info(response: ChatResponse, operator: bool) -> TandemInfo:
    badge = response.badge()
    if operator:
        return TandemInfo(**{**response.public(), "reason": badge["reason"]})
    return TandemInfo(**badge)


def _headers(route: str, request_id: str, degraded: bool) -> dict[str, str]:
    return {"x-tandem-route": route, "x-tandem-request-id": request_id,
            "x-tandem-degraded": "true" if degraded else "false"}


def _text_of(message: ChatMessageIn) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in message.content or [] if p.type == "text" and p.text)


def _conversation_id(body: ChatCompletionRequest, owner: str) -> str:
    """One stable session per conversation: its owner (the signed customer, or the key or address calling), the
    user label and the conversation's first user message. The owner makes the id of another caller's conversation
    unguessable; the service also refuses a session id of another owner (chains/service.py)."""
    first = next((_text_of(m) for m in body.messages if m.role == "user"), "")
    seed = f"{owner}\x00{body.user or ''}\x00{first}"
    return "oa-" + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def data_url_file(url: str) -> str:
    if not url.startswith("data:"):
        raise AttachmentError("Only images sent inline as data: URLs are read; Tandem does not fetch web addresses.")
    header, _, payload = url.partition(",")
    mime = header[5:].split(";")[0].lower()
    if ";base64" not in header or mime not in IMAGE_SUFFIX:
        raise AttachmentError(f"The image part must be a base64 data URL of a PNG, JPEG, WebP, GIF or BMP image "
                              f"(got '{header[:40]}').")
    try:
        return _bytes_file(base64.b64decode(payload, validate=True), IMAGE_SUFFIX[mime])
    except (binascii.Error, ValueError):
        raise AttachmentError("The image part is not valid base64; please send the image again.") from None


def _bytes_file(data: bytes, suffix: str) -> str:
    with tempfile.NamedTemporaryFile(prefix="tandem-openai-", suffix=suffix, delete=False) as handle:
        handle.write(data)
    return handle.name
