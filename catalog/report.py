"""What the console's Catalog page reads: the imports with their reports, the facets, the most-asked products, the
search log and the null-search report. Plain reads of the catalog's tables (no encoder, no Chroma), so the console
shows them without opening the catalog itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import SQLModel, col, select

from catalog.log import imports, null_searches, searches
from catalog.log import most_asked as _most_asked
from catalog.store import TABLES, CatalogProduct
from storage.db import Database

__all__ = ["facets", "imports", "most_asked", "null_searches", "searches"]
FACETS = ("category", "color", "size", "material")


def ensure_tables(db: Database) -> None:
    SQLModel.metadata.create_all(db.engine, tables=TABLES)


def facets(db: Database) -> dict[str, dict[str, int]]:
    """Per facet (category, color, size, material), each value and how many products have it, most first."""
    out: dict[str, dict[str, int]] = {name: {} for name in FACETS}
    with db.session() as session:
        for row in session.exec(select(CatalogProduct.category, CatalogProduct.color, CatalogProduct.size,
                                       CatalogProduct.material)).all():
            for name, value in zip(FACETS, row):
                if value:
                    out[name][value] = out[name].get(value, 0) + 1
    return {name: dict(sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))) for name, values in out.items()}


def most_asked(db: Database, since: datetime | None = None, top: int = 20) -> list[dict[str, Any]]:
    """:func:`catalog.log.most_asked` with each product's title and price ("" and None for one since removed)."""
    rows = _most_asked(db, since, top)
    ids = [r["product_id"] for r in rows]
    with db.session() as session:
        known = {p.id: p for p in session.exec(select(CatalogProduct).where(col(CatalogProduct.id).in_(ids))).all()}
    for row in rows:
        product = known.get(row["product_id"])
        row["title"] = product.title if product else ""
        row["price"] = product.effective_price if product else None
    return rows
