"""The LLM contract the router chain calls: stream (or complete) an answer, admit under load, cancel.

:class:`chains.llm.client.LLMClient` implements it over any OpenAI-compatible endpoint (vLLM); tests of
faults that cannot be made for real may put another implementation behind the same four calls.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel


class LLMResult(BaseModel):
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    tier: str
    ttft_ms: float
    latency_ms: float
    attempts: int
    cancelled: bool = False  # the caller stopped it midway; ``text`` is what had arrived
    finish_reason: str = ""  # "stop", "length" (cut at the token limit), "cancelled"


class LLMUnavailable(Exception):
    """Every try failed, the breaker is open, or the call found no free slot in its queue budget."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class LLM(ABC):
    @abstractmethod
    def stream(self, messages: list[dict], *, max_tokens: int | None = None, score: float | None = None,
               cancel: threading.Event | None = None, temperature: float | None = None,
               user_id: str = "", priority: int = 0) -> Iterator[str | LLMResult]:
        """Text deltas as they arrive, then one :class:`LLMResult`. Raises :class:`LLMUnavailable` (also midway).

        When ``cancel`` is set the request is aborted in the engine at the next token, and the result says so.
        ``user_id`` lets the engine serve a VIP before queued requests (where it schedules by priority); ``priority``
        (lower is sooner) asks for a priority of the caller's own, as background work does with a high number.
        """

    def complete(self, messages: list[dict], *, max_tokens: int | None = None, score: float | None = None,
                 temperature: float | None = None) -> LLMResult:
        result = None
        for item in self.stream(messages, max_tokens=max_tokens, score=score, temperature=temperature):
            if isinstance(item, LLMResult):
                result = item
        if result is None:  # stream() always ends with a result or raises; guard against a silent None
            raise LLMUnavailable("LLM stream ended without a result")
        return result

    @abstractmethod
    def admit(self, user_id: str) -> tuple[bool, str]:
        """Should this message use the LLM now? (False, reason) means degrade to the small tier."""

    def cancel(self, token: threading.Event) -> None:
        """Abort the stream that was given ``token`` (from any thread)."""
        token.set()

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """Load, breaker and tiers, for /healthz and the console."""

    def close(self) -> None:  # noqa: B027  (optional hook: most implementations have nothing to stop)
        """Stop background work (metrics polling)."""
