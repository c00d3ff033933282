"""One message on its way through the chain: the :class:`Turn` every stage reads and writes, and its clock.

A stage that settles the answer marks the turn done and later stages pass it through. Every stage appends
to ``turn.trace`` and times itself, so the request log can explain each decision.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chains.schema import SMALL_ROUTE, ChatRequest, Decided, RefusalCode
from core.policy import Thresholds


@dataclass
class Turn:
    request: ChatRequest
    thresholds: Thresholds
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    new_session: bool = False            # the service minted the session id: no history, no session row yet
    past_cache: bool = False             # decide without the response cache (does the KB cover it, not what was served)
    history: list[dict[str, str]] = field(default_factory=list)
    text: str = ""
    query: str = ""                      # what retrieval sees: the text, plus the last turn for follow-ups
    search_text: str = ""                # the query as the KB embeds and matches it (typos mended, see focus)
    vector: np.ndarray | None = None
    hits: Sequence[Any] = ()
    route: str = ""
    plan: str = ""                       # a plan a tier serves: small | llm | rewrite | tool | handoff
    rule: Any = None                     # chains.rules.Rule that matched, if any (a tool tier runs its tool)
    answer: str = ""
    draft: Any = None                    # chains.answers.Draft once the threshold stage made one
    context: Any = None                  # chains.routers.base.RouteContext once the score stage made one
    sources: list[dict[str, Any]] = field(default_factory=list)
    # The catalog's part (chains/tiers/catalog.py): its reply once the catalog step claimed the message (plan
    # "catalog"), and the product cards and filter chips the answer carries (ChatResponse.products / filters).
    catalog: Any = None
    # Advice on products (catalog.advice.Advice): the candidates whose cards come first and whose records are the LLM's
    # context; its claims check joins the answer check. None for any other message.
    advice: Any = None
    # The route's detail: a product message's kind (catalog.reply: search | fact | compare | stock | photo | advice |
    # mixed), set by the catalog step; "" for any other message. ChatResponse.intent and the request log carry it.
    intent: str = ""
    products: list[dict[str, Any]] = field(default_factory=list)
    filters: list[dict[str, Any]] = field(default_factory=list)
    suggestions: list[dict[str, Any]] = field(default_factory=list)  # predicted follow-ups (chains/followups.py)
    scores: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: dict[str, float] = field(default_factory=dict)
    degraded: bool = False
    no_fit: bool = False                 # the small tier answers although the router would have asked the LLM
    fallback: bool = False
    cache_hit: bool = False
    cache_origin: str = ""               # a hit's payload origin: the route that wrote it, or "prepared"
    cache_entry: tuple[str, str] | None = None  # a hit's (namespace, entry key)
    cancelled: bool = False
    handoff: bool = False                # the answer check handed the conversation to a human
    # A tier that asks for a person itself (the catalog: a product photo that found nothing): (trigger, reason, the
    # line the customer reads once the conversation is queued); the service decides (chains/service.py _trigger)
    escalation: tuple[str, str, str] | None = None
    findings: list[dict[str, str]] = field(default_factory=list)  # what the answer check found, and did
    # What the customer finally reads: draft | rewrite | llm | draft_with_caveat | human_offer | handoff | cache | tool
    # | guard
    served: str = ""
    rejected_text: str = ""              # an LLM text that failed verification, kept for the operator only
    kb_version: str = ""
    routing_version: str = ""  # router fingerprint and rules version: what decided the cached answers
    space: str = ""                      # the KB vector space of the message ("" primary, "zh" ...)
    language: str = "en"                 # the message's language (core.text.language_of), taken once at the guard
    router: Any = None                   # the router snapshot of this turn (chains.routers.base.Router)
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    finish_reason: str = "stop"
    refusal: RefusalCode = ""            # the guard's code when it refused (ChatResponse.refusal)
    done: bool = False
    # Set by whoever serves the answer (Stop button, a client that went away); the LLM tier checks it between
    # tokens and aborts the engine's request.
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def cache_key(self) -> str:
        """Cached answers belong to one KB version, one set of thresholds, one router and one rule book: a change
        to any of them retires them. A forced tier (``mode``) keeps answers of its own."""
        mode = self.request.mode
        return (f"{self.kb_version}:{self.thresholds.version}:{self.routing_version}:{self.space}"
                + ("" if mode == "routed" else f":{mode}"))

    def decided(self, tier: str) -> Decided:
        """The decision as the front ends show it before the answer: the route of a settled turn, else the name of
        the tier about to answer (a rewrite is the LLM tier's)."""
        route = self.route if self.done else tier
        return Decided(request_id=self.request_id, route=route or "guard", degraded=self.degraded,
                       revisable=not self.done and self.plan == "rewrite", products=list(self.products),
                       filters=list(self.filters))

    def note(self, stage: str, decision: str, **detail: Any) -> None:
        self.trace.append({"stage": stage, "decision": decision, "detail": detail,
                           "ms": round(self.latency_ms.get(stage, 0.0), 3)})

    def finish(self, route: str, answer: str, reason: str, refusal: RefusalCode = "") -> Turn:
        self.route, self.answer, self.done, self.refusal = route, answer, True, refusal
        self.served = self.served or {SMALL_ROUTE: "draft"}.get(route, route)
        self.reasons.append(reason)
        return self


@contextmanager
def timed(turn: Turn, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        turn.latency_ms[stage] = turn.latency_ms.get(stage, 0.0) + (time.perf_counter() - start) * 1000
