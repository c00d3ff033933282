"""Request and response bodies of the HTTP API (`/api/v1/...`). Types are strict: a number is not a message."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

# The body of one chat call is a short JSON object; anything far larger is refused before parsing.
# It is well above max_message_chars so that over-long messages still reach the guard and get logged.
MAX_BODY_BYTES = 1_000_000


class ChatIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # No length limits here on purpose: empty and over-long messages go to the service's guard, which
    # answers them with a customer-facing message and logs a request row.
    message: StrictStr
    session_id: StrictStr = Field("", max_length=128)
    user_id: StrictStr = Field("", max_length=128)


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    request_id: StrictStr = Field(min_length=1, max_length=64)
    rating: Literal[1, -1] = Field(description="+1 thumbs up, -1 thumbs down")
    comment: StrictStr = Field("", max_length=2000)
    user_id: StrictStr = Field("", max_length=128)


class FeedbackOut(BaseModel):
    ok: bool = True
    request_id: str


class ErrorOut(BaseModel):
    """Every 4xx/5xx body. `request_id` is set when the message reached the chain (and was logged)."""

    error: str
    request_id: str | None = None
    session_id: str | None = None


def explain(exc: ValidationError) -> str:
    """One line naming each bad field, e.g. "message: is required; rating: must be 1 or -1"."""
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err.get("loc", ())) or "body"
        kind = err.get("type", "")
        if kind == "missing":
            text = "is required"
        elif kind in ("string_type", "str_type"):
            text = "must be a string"
        elif kind == "literal_error" and field == "rating":
            text = "must be 1 (thumbs up) or -1 (thumbs down)"
        elif kind == "model_type" or kind == "model_attributes_type":
            field, text = "body", "must be a JSON object"
        else:
            text = err.get("msg", "is invalid").lower()
        parts.append(f"{field}: {text}")
    return "; ".join(parts)

