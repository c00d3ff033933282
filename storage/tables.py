"""The tables. One row in ``requests`` per user message, whatever happened to it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Optional

from sqlalchemy import JSON, Column, Table, Text
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


def table_of(model: type[SQLModel]) -> Table:
    """The SQLAlchemy table behind a table model, for core queries (fast reads of many rows)."""
    return model.__table__  # type: ignore[attr-defined]  # set by SQLModel's metaclass


class RequestLog(SQLModel, table=True):
    __tablename__ = "requests"

    id: str = Field(default_factory=new_id, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    session_id: str = Field(default="", index=True)
    user_id: str = Field(default="", index=True)
    channel: str = Field(default="cli", description="cli | api | ui | batch")
    modality: str = Field(default="text", description="text, or text plus image/audio")
    text: str = Field(default="", sa_column=Column(Text))
    answer: str = Field(default="", sa_column=Column(Text))
    route: str = Field(default="", index=True, description="guard | cache | tool | small | llm | handoff")
    degraded: bool = False
    fallback: bool = False
    cache_hit: bool = False
    cancelled: bool = Field(default=False, description="the customer stopped it or the client went away mid-answer")
    findings: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON),
                                           description="what the answer check found in an LLM answer, and did")
    served: str = Field(default="", description="what the customer read: draft | rewrite | llm | draft_with_caveat | "
                                                "human_offer | handoff | cache | tool | guard")
    rejected_text: str = Field(default="", sa_column=Column(Text),
                               description="an LLM text that failed verification and was not shown (operators only)")
    scores: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    trace: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    latency_ms: dict[str, float] = Field(default_factory=dict, sa_column=Column(JSON))
    total_ms: float = 0.0
    sources: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = Field(default="", sa_column=Column(Text))
    kb_version: str = ""
    settings_version: int = 0
    intent: str = Field(default="", description="the route's detail for a product message: search | fact | compare | "
                                                "stock | photo | mixed (route catalog) | advice (route llm)")


class Feedback(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    request_id: str = Field(index=True)
    rating: int = Field(description="+1 thumbs up, -1 thumbs down")
    comment: str = ""
    # answer_id and chosen_in were written by the clarify route (removed 2026-12-07, docs/decisions.md). They stay:
    # databases made since hold them as NOT NULL columns without a default, and the migration is additive only
    # (storage/db.py), so a model without them could no longer insert feedback there.
    answer_id: str = Field(default="", description="unused since the clarify route's removal (always \"\")")
    chosen_in: str = Field(default="", description="unused since the clarify route's removal (always \"\")")
    user_id: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class RouterSettings(SQLModel, table=True):
    """Thresholds, versioned: every save is a new row; the highest version is live."""

    __tablename__ = "router_settings"

    version: Optional[int] = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow)
    author: str = "system"
    reason: str = ""
    values: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


class ChatSession(SQLModel, table=True):
    __tablename__ = "sessions"

    id: str = Field(default_factory=new_id, primary_key=True)
    user_id: str = Field(default="", index=True)
    # Who opened it: "customer:<signed id>", or the anonymous client ("key:<id>" or "addr:<ip>"). Another caller
    # naming this session id gets a new session (chains/service.py), so a conversation cannot be read by guessing.
    owner: str = Field(default="", index=True)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ChatMessage(SQLModel, table=True):
    __tablename__ = "messages"

    id: Optional[int] = Field(default=None, primary_key=True)
    session_id: str = Field(index=True)
    # "user" is the customer (rows written before operators existed say so too; the APIs show it as "customer"),
    # "operator" a person's reply (``author`` names them), "note" what an operator left the bot on hand-back.
    role: str = Field(description="user | assistant | operator | note")
    content: str = Field(default="", sa_column=Column(Text))
    author: str = Field(default="", description="the operator who wrote an operator message or note")
    # A user message the LLM answered: the message as the LLM got it (this turn's help-center context, the fence), masked
    # like ``content``. The next turns' prompts repeat it as sent, so vLLM reuses the KV state (chains/answers.py).
    sent: Optional[str] = Field(default=None, sa_column=Column(Text, nullable=True))
    request_id: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class Order(SQLModel, table=True):
    """Demo orders for the order-status tool."""

    __tablename__ = "orders"

    order_id: str = Field(primary_key=True)
    user_id: str = Field(index=True)
    email: str = ""
    status: str = ""
    items: str = ""
    total: float = 0.0
    currency: str = "USD"
    carrier: str = ""
    tracking_number: str = ""
    eta: str = ""
    created_at: str = ""


class Handoff(SQLModel, table=True):
    """A 'talk to a human' request, shown in the console's queue."""

    id: Optional[int] = Field(default=None, primary_key=True)
    session_id: str = Field(default="", index=True)
    user_id: str = ""
    request_id: str = ""
    note: str = ""
    status: str = "open"
    created_at: datetime = Field(default_factory=utcnow)


class ConsoleLogin(SQLModel, table=True):
    """One row per console sign-in attempt: the brute-force throttle counts them (console/auth.py)."""

    __tablename__ = "console_logins"

    id: Optional[int] = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    operator: str = ""
    address: str = Field(default="", index=True)
    ok: bool = False


class ApiKey(SQLModel, table=True):
    """An API key: only its SHA-256 is kept (keys are 32 random bytes, so a slow hash would add nothing).
    Managed with `tandem keys create|list|revoke`; checked in app/access.py."""

    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, description="the public part of the key, 'tdm_<id>_<secret>'")
    name: str = ""
    scopes: str = Field(default="chat", description="comma-separated: chat, kb, agent, admin")
    secret_sha256: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    revoked_at: Optional[datetime] = None


class Operator(SQLModel, table=True):
    """A console account: the password is kept as a bcrypt hash (`tandem operators add NAME`)."""

    __tablename__ = "operators"

    name: str = Field(primary_key=True)
    password_bcrypt: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    disabled: bool = False


class RouterArtifact(SQLModel, table=True):
    """A promoted router (its parameters); the newest one not retired is live in every replica. Rollback
    retires the live one, so the one promoted before it is live again and the history stays readable."""

    __tablename__ = "router_artifacts"

    id: Optional[int] = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    author: str = ""
    note: str = Field(default="", sa_column=Column(Text))
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    retired: bool = Field(default=False, index=True)
    retired_by: str = ""
    retired_at: Optional[datetime] = None


class Alert(SQLModel, table=True):
    """An anomaly the ops detector found in the request log (or an automatic action that went wrong)."""

    __tablename__ = "alerts"

    id: Optional[int] = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    series: str = Field(index=True, description="llm_share, fallback_rate, p95_ms_llm, ... or autotune")
    state: str = Field(default="open", index=True, description="open | acknowledged | resolved")
    direction: str = "up"
    value: float = 0.0
    baseline: float = 0.0
    spread: float = 0.0
    score: float = 0.0
    message: str = Field(default="", sa_column=Column(Text))
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    acknowledged_by: str = ""
    acknowledged_at: Optional[datetime] = None
    resolved_at: Optional[datetime] = None
    notified: bool = False


class OpsLease(SQLModel, table=True):
    """Which process runs the ops job now, so several app replicas do not all detect and tune at once."""

    __tablename__ = "ops_lease"

    name: str = Field(primary_key=True)
    holder: str = ""
    until: datetime = Field(default_factory=utcnow)


class OpsEvent(SQLModel, table=True):
    """What the ops job did and why: applied, kept, skipped, waiting, confirmed, rolled_back (the audit trail)."""

    __tablename__ = "ops_events"

    id: Optional[int] = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    kind: str = Field(index=True)
    message: str = Field(default="", sa_column=Column(Text))
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


class PreparedAnswer(SQLModel, table=True):
    """An LLM answer the idle-time worker prepared for a recurring question and stored in the shared response cache
    (ops/prepared.py). The row vouches for the cache entry: a hit on it counts here, and once the row is deleted
    (an operator's tombstone) the entry is no longer served."""

    __tablename__ = "prepared_answers"

    id: Optional[int] = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    question: str = Field(default="", sa_column=Column(Text), description="the group's representative question")
    answer: str = Field(default="", sa_column=Column(Text))
    namespace: str = Field(default="", index=True, description="the cache key it is stored under (Turn.cache_key)")
    entry_key: str = Field(default="", index=True, description="the cache entry's key: the normalised question")
    kb_version: str = Field(default="", index=True)
    group_size: int = 0
    sessions: int = 0
    tokens: int = Field(default=0, description="prompt and completion tokens the preparing request spent")
    request_id: str = Field(default="", description="the logged request (channel prepare) that wrote it")
    hits: int = 0
    last_hit_at: Optional[datetime] = None
    deleted: bool = Field(default=False, description="an operator deleted it: not served, not prepared again for "
                                                     "this KB version")


class ConversationState(SQLModel, table=True):
    """Who holds a conversation now: the bot, the queue (waiting for a person), a person (one operator), or the bot
    again after a person (chains/conversation.py owns the changes; every one is a ConversationEvent)."""

    __tablename__ = "conversation_states"

    session_id: str = Field(primary_key=True)
    status: str = Field(default="bot", index=True, description="bot | waiting | human | returned")
    operator: str = Field(default="", description="the person holding it (status human)")
    trigger: str = Field(default="", description="what started the handoff: button | asked | rule | answer_check | vip | "
                         "repeat")
    reason: str = Field(default="", sa_column=Column(Text), description="why, in words operators read (masked)")
    request_id: str = Field(default="", description="the request that escalated (its log row holds the packet)")
    user_id: str = ""
    waiting_since: Optional[datetime] = Field(default=None, index=True)
    claimed_at: Optional[datetime] = None
    summary: str = Field(default="", sa_column=Column(Text), description="the operator's hand-back note (masked)")
    packet: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON),
                                   description="the handoff packet: unsent suggestions for the operator (masked)")
    contact_email: str = Field(default="", description="where the reply goes when nobody was online (the customer "
                               "left it while waiting; operators read it, logs keep it masked)")
    version: int = Field(default=0, description="bumped by every change: a compare-and-set guard")
    updated_at: datetime = Field(default_factory=utcnow)


class ConversationEvent(SQLModel, table=True):
    """One change of a conversation's state: from, to, who, when and why (the audit trail of handoffs)."""

    __tablename__ = "conversation_events"

    id: Optional[int] = Field(default=None, primary_key=True)
    session_id: str = Field(index=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    from_status: str = ""
    to_status: str = Field(default="", index=True)
    actor: str = Field(default="", description="customer | bot | operator:<name> | system")
    trigger: str = ""
    reason: str = Field(default="", sa_column=Column(Text))
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


class OperatorSeen(SQLModel, table=True):
    """When an operator last used the inbox (console page or agent API): "operators online" counts the recent ones."""

    __tablename__ = "operators_seen"

    name: str = Field(primary_key=True)
    seen_at: datetime = Field(default_factory=utcnow, index=True)


class KbProposal(SQLModel, table=True):
    """An operator's reply to a question the knowledge base did not cover, proposed as a KB answer (chains/learning.py):
    a new answer, or (``merge_into``: a near-duplicate of an existing answer) the customer's wording added to that
    answer as an example question. Approving ingests it and re-asks the question through the chain (``check``)."""

    __tablename__ = "kb_proposals"

    id: Optional[int] = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    session_id: str = Field(default="", index=True)
    handoff_at: Optional[datetime] = Field(default=None, description="the handoff it answers (one proposal per handoff)")
    request_id: str = ""
    question: str = Field(default="", sa_column=Column(Text), description="the customer's wording (masked)")
    answer: str = Field(default="", sa_column=Column(Text), description="the operator's reply (masked)")
    operator: str = ""
    status: str = Field(default="proposed", index=True, description="proposed | approved | rejected")
    merge_into: str = Field(default="", description="an existing answer_id this near-duplicates; empty: a new answer")
    similarity: float = Field(default=0.0, description="the reply's encoder similarity to merge_into's answer")
    coverage: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON),
                                     description="why the KB did not cover the question (route, scores)")
    answer_id: str = Field(default="", description="the KB answer it became (or was merged into) once approved")
    decided_by: str = ""
    decided_at: Optional[datetime] = None
    check: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON),
                                  description="the question re-asked after approval: route, cited answers, answered")
