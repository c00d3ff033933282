"""The record of prepared answers (issue 42, part 2): what the idle-time worker stored in the shared response cache,
the hits each got, and the operator's deletions. The cache holds the answers; these rows vouch for them (a deleted
row's entry is not served, chains/router_chain.py) and count their hits (chains/service.py, in the request's own
transaction)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.sql import Update
from sqlmodel import select

from storage.db import Database
from storage.tables import PreparedAnswer, table_of, utcnow


def record(db: Database, **fields: Any) -> PreparedAnswer:
    """A prepared answer whose cache entry is stored now. One row per cache entry: an answer prepared again under the
    same key (the entry expired) renews that row (answer, tokens added, time) and keeps its hits."""
    with db.session() as session:
        row = session.exec(select(PreparedAnswer).where(
            PreparedAnswer.namespace == fields.get("namespace", ""),
            PreparedAnswer.entry_key == fields.get("entry_key", ""),
            PreparedAnswer.deleted == False)).first()  # noqa: E712
        if row is None:
            row = PreparedAnswer(**fields)
        else:
            tokens = row.tokens + int(fields.pop("tokens", 0))
            for name, value in {**fields, "tokens": tokens, "created_at": utcnow()}.items():
                setattr(row, name, value)
        session.add(row)
        session.commit()
        session.refresh(row)
    return row


def vouched(db: Database, namespace: str, entry_key: str) -> bool:
    """Whether a prepared cache entry may be served: its row exists and no operator deleted it."""
    t = table_of(PreparedAnswer)
    query = (select(t.c.id).where(t.c.namespace == namespace, t.c.entry_key == entry_key, t.c.deleted.is_(False))
             .limit(1))
    with db.engine.connect() as conn:
        return conn.execute(query).first() is not None


def hit_statement(namespace: str, entry_key: str, at: datetime | None = None) -> Update:
    """The UPDATE that counts one cache hit on a prepared answer (run in the hit's request-log transaction)."""
    t = table_of(PreparedAnswer)
    return (update(t).where(t.c.namespace == namespace, t.c.entry_key == entry_key, t.c.deleted.is_(False))
            .values(hits=t.c.hits + 1, last_hit_at=at or utcnow()))


def listing(db: Database, limit: int = 500, deleted: bool = False) -> list[PreparedAnswer]:
    """The newest prepared answers (deleted ones only when asked)."""
    query = select(PreparedAnswer).order_by(PreparedAnswer.created_at.desc()).limit(limit)  # type: ignore[attr-defined]
    if not deleted:
        query = query.where(PreparedAnswer.deleted == False)  # noqa: E712
    with db.session() as session:
        return list(session.exec(query).all())


def mark_deleted(db: Database, prepared_id: int) -> PreparedAnswer | None:
    """Tombstone one prepared answer; the row as it was, or None when there is no such row."""
    with db.session() as session:
        row = session.get(PreparedAnswer, prepared_id)
        if row is None:
            return None
        row.deleted = True
        session.add(row)
        session.commit()
        session.refresh(row)
        return row


def tombstoned(db: Database, kb_version: str) -> set[str]:
    """Entry keys an operator deleted under this KB version: the worker does not prepare them again."""
    t = table_of(PreparedAnswer)
    query = select(t.c.entry_key).where(t.c.kb_version == kb_version, t.c.deleted.is_(True))
    with db.engine.connect() as conn:
        return {row.entry_key for row in conn.execute(query)}
