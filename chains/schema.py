"""What goes into the chain and what comes out. `tandem ask --json`, the HTTP API and the UI share it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Route = Literal["guard", "cache", "tool", "small", "llm"]


class ChatRequest(BaseModel):
    message: str
    session_id: str = ""
    user_id: str = ""
    channel: str = "cli"                      # cli | api | ui | batch
    modality: str = "text"                    # text, or e.g. "text+image", "audio"
    extracted: list[str] = Field(default_factory=list)  # text read from attachments (OCR, speech), shown to users
    attachment_errors: list[str] = Field(default_factory=list)  # clear messages for files we could not read


class Source(BaseModel):
    answer_id: str
    title: str
    score: float


class ChatResponse(BaseModel):
    request_id: str
    route: Route
    answer: str
    sources: list[Source] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)
    reasons: list[str] = Field(default_factory=list)
    latency_ms: dict[str, float] = Field(default_factory=dict)
    degraded: bool = False
    fallback: bool = False
    trace: list[dict[str, Any]] = Field(default_factory=list)
    session_id: str = ""

    def public(self) -> dict[str, Any]:
        """The documented shape of `tandem ask --json` and `POST /api/v1/chat`."""
        return self.model_dump(include={"request_id", "route", "answer", "sources", "scores", "reasons",
                                        "latency_ms", "degraded", "fallback", "session_id"})
