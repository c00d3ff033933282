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
    route: str = Field(default="", index=True, description="guard | cache | tool | small | llm")
    degraded: bool = False
    fallback: bool = False
    cache_hit: bool = False
    cancelled: bool = Field(default=False, description="the customer stopped it or the client went away mid-answer")
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


class Feedback(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    request_id: str = Field(index=True)
    rating: int = Field(description="+1 thumbs up, -1 thumbs down")
    comment: str = ""
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
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ChatMessage(SQLModel, table=True):
    __tablename__ = "messages"

    id: Optional[int] = Field(default=None, primary_key=True)
    session_id: str = Field(index=True)
    role: str = Field(description="user | assistant")
    content: str = Field(default="", sa_column=Column(Text))
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
    ok: bool = False
