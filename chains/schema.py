"""What goes into the service and what comes out: every front end (CLI, HTTP APIs, chat UI) speaks these."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from storage.customers import signed_owner

# The routes an answer can carry (ChatResponse.route, the logged RequestLog.route): the answering tiers' names and
# the stages that settle a turn before any tier. Code reads them here (or from chains.tiers) rather than spelling
# them; Route is the same list as a type (tests/unit/test_tier_registry.py holds the two together).
GUARD_ROUTE, CACHE_ROUTE, TOOL_ROUTE, SMALL_ROUTE, LLM_ROUTE = "guard", "cache", "tool", "small", "llm"
HANDOFF_ROUTE = "handoff"
# A message to a conversation a person holds (chains/conversation.py): logged for the operator, no answer from the bot.
HUMAN_ROUTE = "human"
# Answered from the product catalog with no LLM (chains/tiers/catalog.py); the trace's catalog step names its kind
# (search, fact, compare, stock).
CATALOG_ROUTE = "catalog"
ROUTES = (GUARD_ROUTE, CACHE_ROUTE, TOOL_ROUTE, SMALL_ROUTE, LLM_ROUTE, HANDOFF_ROUTE, HUMAN_ROUTE, CATALOG_ROUTE)
Route = Literal["guard", "cache", "tool", "small", "llm", "handoff", "human", "catalog"]
# routed: the router decides (normal); small: the knowledge-base tier only; llm: the LLM tier only. Guard,
# rules and logging apply to every mode.
Mode = Literal["routed", "small", "llm"]
# Why the guard refused a message, for machines: the HTTP APIs choose their status by it (app/serving.py), so a
# reason's wording can change freely. "" when nothing was refused. The reasons say the same for operators.
RefusalCode = Literal["", "empty", "control_only", "too_many_controls", "too_long", "no_words",
                      "attachment_unreadable", "rate_limited"]
# The channel of the requests Tandem's own idle-time worker sends (ops/prepared.py): answers prepared while the LLM
# engine is idle. The chain stores such an answer with origin "prepared"; the recurring-question groups and the ops
# series leave these rows out (they are not customers' traffic).
PREPARE_CHANNEL = "prepare"
MAX_ANSWER_TOKENS = 4096  # the most tokens a caller may ask one answer for (Settings.llm_max_tokens is the default)


class PhotoRead(BaseModel):
    """What one attached photo yielded for a product look-up: the barcodes decoded from it (EAN/UPC digits) and its
    OCR text (a label's), either possibly empty (a photo with neither still travels, for the catalog to say it found
    nothing). ``thumbnail`` is a small JPEG copy (a data URL): the upload itself is deleted once read, and the copy is
    kept only when the photo goes with a handoff (the packet an operator reads)."""

    codes: list[str] = Field(default_factory=list)
    text: str = ""
    name: str = ""
    thumbnail: str = ""

    def for_operator(self, scrub: Callable[[str], str] = lambda text: text) -> dict[str, Any]:
        """What a handoff packet keeps of the photo: its name, the codes and text read (masked), the small copy."""
        return {"name": self.name, "codes": list(self.codes), "text": scrub(self.text), "thumbnail": self.thumbnail}


class ChatRequest(BaseModel):
    message: str
    session_id: str = ""
    user_id: str = ""                         # a label the caller chose (logs, feedback); never an identity
    # The signed-in customer, verified by the front end from a signed token (core.identity), or set by an operator's
    # own CLI. Only this unlocks orders, the conversation history and priority on the LLM.
    customer: str = ""
    # The anonymous caller: "key:<api key id>" or "addr:<client address>" ("" for the operator's CLI and batch runs).
    # It owns the sessions it opens when no customer is signed in, and its LLM token budget is counted on it.
    client: str = ""
    channel: str = "cli"                      # cli | api | ui | batch | prepare
    modality: str = "text"                    # text, or e.g. "text+image", "audio"
    extracted: list[str] = Field(default_factory=list)  # text read from attachments (OCR, speech), shown to users
    attachment_errors: list[str] = Field(default_factory=list)  # clear messages for files we could not read
    # The photos among the attachments, their barcodes and label text: the catalog step looks the product up by its
    # GTIN first, then by the label (chains/tiers/catalog.py)
    photos: list[PhotoRead] = Field(default_factory=list)
    mode: Mode = "routed"
    # Earlier turns as [{"role", "content"}]; None means the session's stored history (the chat UI, /api/v1).
    history: list[dict[str, str]] | None = None
    max_tokens: int | None = Field(None, ge=1, le=MAX_ANSWER_TOKENS)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    # A suggested reply the customer clicked (ChatResponse.suggestions): that KB answer's id, answered from it at
    # once by the small tier (chains/tiers/small.py), and counted as a click (chains/followups.py).
    suggestion: str = Field("", max_length=200)
    # vLLM scheduling priority of the LLM call (lower is served sooner; 0 the engine's default). Set only by Tandem's
    # own idle-time worker (ops/prepared.py), which sends at the lowest priority; no front end passes it on.
    priority: int = 0

    @property
    def names_answer(self) -> bool:
        """The customer picked the answer (a clicked suggested reply): it is answered from that choice, and never
        looked up in or stored to the cache."""
        return bool(self.suggestion)

    @property
    def owner(self) -> str:
        """Who a session opened by this request belongs to ("" for the operator's own channels)."""
        return signed_owner(self.customer) if self.customer else self.client

    @field_validator("message", "session_id", "user_id", "extracted", "history", mode="after")
    @classmethod
    def _no_lone_surrogates(cls, value):
        # JSON may carry "\ud800"; such a string cannot be encoded as UTF-8, so the tokenizer and the
        # request log would fail on it (and a row that can never be written would stall the log backlog).
        if value is None:
            return None
        if isinstance(value, list):
            return [{k: _valid_unicode(v) for k, v in item.items()} if isinstance(item, dict) else _valid_unicode(item)
                    for item in value]
        return _valid_unicode(value)


def _valid_unicode(text: str) -> str:
    """Lone surrogates become U+FFFD (which the guard drops); everything else is unchanged."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _SURROGATE.search(text) else text


_SURROGATE = re.compile("[\ud800-\udfff]")


class Decided(BaseModel):
    """Streamed before the answer's first piece: the route is known (front ends can send headers now)."""

    request_id: str
    route: Route
    degraded: bool = False
    # The text that follows is the knowledge-base draft, shown at once while an LLM rewrite of it is written and
    # verified; a :class:`Revised` may replace it. A front end that cannot take text back (an OpenAI stream)
    # waits for the final answer instead.
    revisable: bool = False
    # Advice on products (issue 59): the candidates' cards and the filters are known before the LLM writes a word,
    # so a front end shows them at once and the advice follows under them.
    products: list[dict[str, Any]] = Field(default_factory=list)
    filters: list[dict[str, Any]] = Field(default_factory=list)


class Revised(BaseModel):
    """Replaces everything streamed so far: a verified rewrite of the draft, or what the chain serves in place of
    an LLM answer that failed its checks."""

    text: str


class Source(BaseModel):
    answer_id: str
    title: str
    score: float
    # A product fact's source (the catalog tier): the product and the field the value was read from. Absent from a
    # help-center source.
    product_id: str = Field("", exclude_if=lambda value: not value)
    field: str = Field("", exclude_if=lambda value: not value)


class AnswerBadge(BaseModel):
    """The fields of an answer a customer may see, defined once: :class:`ChatResponse` adds what operators see, and
    the HTTP API's answer (app/protocol.py ``ChatOut``) is these plus one line of why."""

    request_id: str
    route: Route
    answer: str
    sources: list[Source] = Field(default_factory=list)
    degraded: bool = False
    fallback: bool = False
    session_id: str = ""
    # What the customer reads, when the route alone does not say it: an LLM-route turn may serve a verified rewrite,
    # the draft (its rewrite rejected), the draft with a caveat or an offer of a person (its answer failed the checks).
    served: str = Field("", description="draft | rewrite | llm | draft_with_caveat | human_offer | handoff | cache | "
                        "tool | catalog | candidates | clarify (the small tier asks which help-center answer is "
                        "meant): what this answer is, e.g. route `llm` with `human_offer` when "
                        "the assistant's answer failed its checks and a person is offered instead")
    # The conversation is waiting for or held by a person (chains/conversation.py Conversations.view); None while the
    # bot has it. ``triggered``: this message handed it over.
    handoff: dict[str, Any] | None = None
    # A catalog answer (route ``catalog``): the product cards in order of relevance (id, title, price, sale_price,
    # currency, availability, link, image_link, ...) and the filters applied, each with its label ("blue", "under
    # $50") and whether it was relaxed to find anything. Empty for every other answer.
    products: list[dict[str, Any]] = Field(default_factory=list)
    filters: list[dict[str, Any]] = Field(default_factory=list)
    # The route's detail for a product message: the catalog's intent (route ``catalog``: search, fact, compare, stock,
    # photo, mixed; route ``llm``: advice, written from the candidates' records). "" for every other message.
    intent: str = Field("", description="search | fact | compare | stock | photo | mixed (route catalog) | advice "
                        "(route llm): what kind of product message this was; empty for any other message")


class ChatResponse(AnswerBadge):
    # Predicted follow-ups (chains/followups.py): KB answers customers often ask next, offered as suggested replies.
    suggestions: list[Source] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)
    reasons: list[str] = Field(default_factory=list)
    latency_ms: dict[str, float] = Field(default_factory=dict)
    cancelled: bool = False
    trace: list[dict[str, Any]] = Field(default_factory=list)
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"  # "length" when an LLM answer was cut at the token limit
    refusal: RefusalCode = ""    # set when the guard refused; never shown to the customer (not in the badge)

    def public(self) -> dict[str, Any]:
        """The operator's view (`tandem ask --json`, an admin key on `POST /api/v1/chat`): scores and reasons too."""
        return {**self.model_dump(include=PUBLIC_FIELDS), **self._offered()}

    def badge(self) -> dict[str, Any]:
        """What a customer may see: the route, the latency, the sources and one line of why. The scores, the reasons
        and the trace name internals (a cached question of another customer, whether an order number exists) and
        stay with operators."""
        return {**self.model_dump(include=BADGE_FIELDS), "reason": customer_reason(self),
                "latency_ms": {"total": round(self.latency_ms.get("total", 0.0), 1)}, **self._offered()}

    def _offered(self) -> dict[str, Any]:
        """The suggested replies, for every caller; an answer without them carries no such key."""
        return {"suggestions": [s.model_dump() for s in self.suggestions]} if self.suggestions else {}


BADGE_FIELDS = set(AnswerBadge.model_fields)
OPERATOR_FIELDS = {"scores", "reasons", "latency_ms"}  # what only operators see (the badge has the total latency)
PUBLIC_FIELDS = BADGE_FIELDS | OPERATOR_FIELDS
CUSTOMER_REASONS = {
    GUARD_ROUTE: "checked before answering",
    CACHE_ROUTE: "the same question was answered recently",
    TOOL_ROUTE: "looked up by one of our tools",
    SMALL_ROUTE: "answered from our help center",
    LLM_ROUTE: "written by our assistant",
    HANDOFF_ROUTE: "handed to a colleague, who will reply here",
    HUMAN_ROUTE: "a colleague holds this conversation and replies here",
    CATALOG_ROUTE: "looked up in our product catalog",
}


# The small tier's question "which one?" (chains/tiers/small.py): what such an answer is.
CLARIFY_SERVED = "clarify"
# An LLM-route answer that is not the assistant's own text says what it is instead (and the small tier's question).
SERVED_REASONS = {
    "rewrite": "our help center's answer, reworded by our assistant and checked against it",
    "draft": "answered from our help center",
    "draft_with_caveat": "our assistant's answer did not pass our checks: the closest help-center answer instead",
    "human_offer": "our assistant could not answer this reliably: a colleague can take over",
    "candidates": "our assistant's advice did not pass our checks: the matching products from our catalog",
    CLARIFY_SERVED: "several help-center answers fit your message about equally well: pick the one you mean",
}


def customer_reason(response: ChatResponse) -> str:
    """One line, the same for every customer who gets this route; never a score or another customer's words."""
    reason = CUSTOMER_REASONS.get(response.route, "")
    if (response.route == "llm" or response.served == CLARIFY_SERVED) and response.served in SERVED_REASONS:
        reason = SERVED_REASONS[response.served]
    elif response.route == "llm" and response.sources:
        reason = "written by our assistant from our help center"
    if response.degraded:
        reason += " (we are busy: a quicker answer)"
    return reason
