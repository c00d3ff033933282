"""The HTTP API's bodies (`/api/v1/...`), request and response side by side. Types are strict: a number is not a
message. FastAPI validates against these and `/api/docs` shows them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from app.inbox_protocol import HandoffOut
from chains.schema import CUSTOMER_REASONS, HANDOFF_ROUTE, AnswerBadge, ChatResponse, Source

# The body of one chat call is a short JSON object; anything far larger is refused before parsing.
# It is well above max_message_chars so that over-long messages still reach the guard and get logged.
MAX_BODY_BYTES = 1_000_000


class ChatIn(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra={
        "examples": [{"message": "Where is my order NW-104233?", "session_id": "s-1"}]})

    # No length limits here on purpose: empty and over-long messages go to the service's guard, which
    # answers them with a customer-facing message and logs a request row.
    message: StrictStr
    session_id: StrictStr = Field("", max_length=128, description="continue a conversation this caller opened")
    user_id: StrictStr = Field("", max_length=128, description="a label for logs; the customer's identity comes "
                               "only from the signed X-Tandem-Customer header")
    stream: StrictBool = Field(False, description="Stream the answer as server-sent events (`delta`, then `done`).")
    suggestion: StrictStr = Field("", max_length=200, description="A suggested reply the customer clicked: one of the "
                                  "last answer's `suggestions`' `answer_id`, answered from that help-center answer at "
                                  "once. Send its `title` as `message`, in the same session.")
    images: list[StrictStr] = Field(default_factory=list, max_length=4, description="Photos or screenshots as base64 "
                                    "data URLs (`data:image/jpeg;base64,...`): their text is read (OCR), and a product "
                                    "photo's barcode or label finds the product in the catalog.")


class ChatOut(AnswerBadge):
    """One answer: what the customer sees (chains.schema.AnswerBadge), which route produced it, and one line of why.
    The router's scores and reasons come only to an admin key (operators); customers get the badge."""

    suggestions: list[Source] | None = Field(None, description="help-center answers customers often ask next: "
                                             "offer them as replies; send a clicked one's `answer_id` as `suggestion`")
    reason: str = Field("", description="why this route, in one line a customer may read")
    latency_ms: dict[str, float] = Field(default_factory=dict)
    scores: dict[str, float] | None = Field(None, description="admin keys only")
    reasons: list[str] | None = Field(None, description="admin keys only")
    handoff: HandoffOut | None = Field(None, description="the conversation waits for a person (place in the queue, "  # type: ignore[assignment]  # the dict, typed
                                       "operators online, expected wait) or a person holds it (route `human`: the "
                                       "bot sent nothing; the operator's replies come from /api/v1/sessions/{id}/...)")

    @classmethod
    def of(cls, response: ChatResponse, operator: bool = False) -> ChatOut:
        badge = response.badge()
        body = {**response.public(), "reason": badge["reason"]} if operator else badge
        if response.handoff and response.handoff.get("triggered"):
            # This message handed the conversation over (a rule, the answer check, VIP): the API says so by route,
            # whichever tier ran (the request log keeps the tier's route and what it served).
            body = {**body, "route": HANDOFF_ROUTE, "reason": CUSTOMER_REASONS[HANDOFF_ROUTE]}
        return cls.model_validate(body)


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    request_id: StrictStr = Field(min_length=1, max_length=64)
    rating: Literal[1, -1] = Field(description="+1 thumbs up, -1 thumbs down")
    comment: StrictStr = Field("", max_length=2000)
    user_id: StrictStr = Field("", max_length=128)


class FeedbackOut(BaseModel):
    ok: bool = True
    request_id: str


class KbAnswerIn(BaseModel):
    answer_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    answer: str = Field(min_length=1, max_length=20000)
    title: str = Field("", max_length=300)
    questions: list[str] = Field(default_factory=list, max_length=200,
                                 description="Example questions customers ask for this answer.")


class KbAnswersIn(BaseModel):
    """Answers to add or replace (by answer_id) in the knowledge base every replica serves."""

    answers: list[KbAnswerIn] = Field(min_length=1, max_length=1000)


class KbAnswersOut(BaseModel):
    answers: int
    questions: int
    kb_version: str


class ErrorOut(BaseModel):
    """Every 4xx/5xx body. `request_id` is set when the message reached the chain (and was logged)."""

    error: str
    request_id: str | None = None
    session_id: str | None = None


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text} for code, text in (
        (400, "the body is not JSON"), (401, "missing or wrong API key, or a customer token that does not verify"),
        (403, "the API key lacks the scope"), (404, "unknown request id"),
        (413, "body or message too long"), (422, "a field is missing or of the wrong type, or the message is empty"),
        (429, "rate limited"), (503, "the assistant is not available"))}


def explain(errors: Sequence[Any]) -> str:
    """One line naming each bad field, e.g. "message: is required; rating: must be 1 or -1"."""
    parts = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        field = ".".join(loc) or "body"
        kind = err.get("type", "")
        if kind == "missing":
            text = "is required"
        elif kind in ("string_type", "str_type"):
            text = "must be a string"
        elif kind == "bool_type":
            text = "must be true or false"
        elif kind == "literal_error" and field == "rating":
            text = "must be 1 (thumbs up) or -1 (thumbs down)"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            field, text = "body", "must be a JSON object"
        else:
            text = str(err.get("msg", "is invalid")).lower()
        parts.append(f"{field}: {text}")
    return "; ".join(parts)


def explain_validation(exc: ValidationError) -> str:
    return explain(exc.errors())
