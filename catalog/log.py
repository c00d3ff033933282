"""What the catalog remembers about its use: each ingest's report, and each search the chat made.

* :class:`CatalogImport`: one row per ingest (`tandem catalog ingest`, the demo's start, a test's): when, which file,
  the feed's format, added/updated/unchanged/removed/embedded, the catalog version after it, and the bad rows by line.
* :class:`CatalogSearchLog`: one row per product message the chain's catalog step took up (chains/tiers/catalog.py):
  when, the message (masked like the request log), its kind (search, fact, compare, stock, photo), the filters' label,
  how many products the answer showed, their ids best first, the constraint relaxed, and the request's session. A row
  with no result is a null search: the report shops read to see what customers want and the catalog lacks.

The console's Catalog page reads them through :func:`imports`, :func:`searches`, :func:`null_searches` and
:func:`most_asked`.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel, col, select

from storage.db import Database


class CatalogImport(SQLModel, table=True):
    __tablename__ = "catalog_import"

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC), index=True)
    file: str = ""
    format: str = ""
    replace: bool = False
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    embedded: int = 0
    version: int = 0
    bad: list = Field(default_factory=list, sa_column=Column(JSON))  # [{"line": n, "reason": "..."}]


class CatalogSearchLog(SQLModel, table=True):
    __tablename__ = "catalog_search_log"

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC), index=True)
    query: str = ""
    kind: str = ""  # search, fact, compare, stock, photo
    filters: str = ""  # the chips' label ("blue · throw blanket · under $50")
    results: int = Field(default=0, index=True)  # products the answer showed (0: a null search)
    top_ids: list = Field(default_factory=list, sa_column=Column(JSON))  # best first
    relaxed: str = ""  # the constraint dropped to find anything ("color blue")
    session_id: str = ""


TABLES = [CatalogImport.__table__, CatalogSearchLog.__table__]  # type: ignore[attr-defined]


def record_import(db: Database, file: str, report: dict[str, Any], replace: bool = False) -> None:
    """Store one ingest's report (``IngestReport.as_dict()``)."""
    with db.session() as session:
        session.add(CatalogImport(file=file, format=report.get("format", ""), replace=replace,
                                  added=report.get("added", 0), updated=report.get("updated", 0),
                                  unchanged=report.get("unchanged", 0), removed=report.get("removed", 0),
                                  embedded=report.get("embedded", 0), version=report.get("version", 0),
                                  bad=list(report.get("bad", []))))
        session.commit()


def log_search(db: Database, query: str, kind: str, filters: str = "", top_ids: list[str] | None = None,
               relaxed: str = "", session_id: str = "") -> None:
    ids = list(top_ids or [])
    with db.session() as session:
        session.add(CatalogSearchLog(query=query[:2000], kind=kind, filters=filters[:500], results=len(ids),
                                     top_ids=ids[:10], relaxed=relaxed[:200], session_id=session_id[:200]))
        session.commit()


def imports(db: Database, limit: int = 50) -> list[CatalogImport]:
    with db.session() as session:
        return list(session.exec(select(CatalogImport).order_by(col(CatalogImport.id).desc()).limit(limit)).all())


def searches(db: Database, since: datetime | None = None, limit: int = 500) -> list[CatalogSearchLog]:
    """The logged searches, newest first."""
    query = select(CatalogSearchLog)
    if since is not None:
        query = query.where(CatalogSearchLog.created_at >= since)
    with db.session() as session:
        return list(session.exec(query.order_by(col(CatalogSearchLog.id).desc()).limit(limit)).all())


def null_searches(db: Database, since: datetime | None = None, top: int = 50) -> list[dict[str, Any]]:
    """The queries that found nothing, grouped by their text (case and spaces folded), most frequent first:
    ``{"query", "count", "kind", "filters", "last_seen"}``."""
    query = select(CatalogSearchLog).where(CatalogSearchLog.results == 0)
    if since is not None:
        query = query.where(CatalogSearchLog.created_at >= since)
    groups: dict[str, dict[str, Any]] = {}
    with db.session() as session:
        for row in session.exec(query.order_by(col(CatalogSearchLog.id))).all():
            key = " ".join(row.query.lower().split())
            group = groups.setdefault(key, {"query": row.query, "count": 0, "kind": row.kind, "filters": row.filters,
                                            "last_seen": row.created_at})
            group["count"] += 1
            group["last_seen"] = row.created_at
    return sorted(groups.values(), key=lambda g: (-g["count"], g["query"]))[:top]


def most_asked(db: Database, since: datetime | None = None, top: int = 20) -> list[dict[str, Any]]:
    """The products the logged searches answered with, most often first: ``{"product_id", "top", "shown"}`` where
    ``top`` counts the answers it led and ``shown`` the answers it was in."""
    led: Counter[str] = Counter()
    shown: Counter[str] = Counter()
    for row in searches(db, since, limit=100_000):
        ids = [str(i) for i in row.top_ids or []]
        if ids:
            led[ids[0]] += 1
        shown.update(dict.fromkeys(ids, 1))
    ranked = sorted(shown, key=lambda pid: (-led[pid], -shown[pid], pid))[:top]
    return [{"product_id": pid, "top": led[pid], "shown": shown[pid]} for pid in ranked]
