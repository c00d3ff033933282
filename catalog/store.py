"""The catalog's storage and its in-memory index.

* SQLModel rows are the record of truth: :class:`CatalogProduct` (one per variant; the product_detail attributes
  also as a JSON column) and :class:`CatalogAttribute` (one row per attribute, so a facet query such as "every
  material the shop has" is one indexed SELECT), and :class:`CatalogState` (the catalog version).
* A Chroma collection (``<prefix>_en``) holds each product's English text and vector, always opened with our own
  embedding function (:mod:`knowledge.store`). A product is embedded again only when its text fields change (their
  hash is kept on the row): a price or stock update writes rows only.
* The Chinese texts are not embedded: MiniLM barely reads Chinese, the Chinese space ranks by BM25 at weight 0.9,
  and embedding them was half of the ingest's encoder time (see docs/catalog.md). The Chinese space's dense part is
  the product's English vector. Catalogs ingested before kept MiniLM vectors of the Chinese texts in
  ``<prefix>_zh``: that collection is no longer read, and the next ingest deletes it.
* In memory, per language, a :class:`~knowledge.index.HybridIndex` over that language's texts gives the lexical
  (BM25) scores; the dense part is one matrix-vector product. Both are rebuilt when the version changes.

The version is an integer bumped by every ingest that changes anything: caches key answers by it, so a changed price
is never served from a cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sqlalchemy import JSON, Column, delete, insert
from sqlmodel import Field, Session, SQLModel, select

from catalog import log
from catalog.feed import BadRow, ProductRecord, read_feed
from core.encoders import Encoder
from knowledge import store as chroma
from knowledge.index import FusionParams, HybridIndex
from storage.db import Database

LANGUAGES = ("en", "zh")
EMBEDDED = "en"  # the language whose texts are embedded; every language's space reads its vectors
# Collections older catalogs wrote and nothing reads any more (MiniLM vectors of the Chinese texts): deleted by an ingest
OBSOLETE_COLLECTIONS = ("zh",)


class CatalogProduct(SQLModel, table=True):
    __tablename__ = "catalog_product"

    id: str = Field(primary_key=True)
    title: str
    description: str = ""
    title_zh: str = ""
    description_zh: str = ""
    link: str = ""
    image_link: str = ""
    price: float
    sale_price: float | None = None
    currency: str = "USD"
    availability: str = Field(default="in_stock", index=True)
    brand: str = ""
    gtin: str = Field(default="", index=True)
    mpn: str = ""
    color: str = Field(default="", index=True)
    size: str = ""
    material: str = ""
    pattern: str = ""
    product_type: str = ""
    product_type_zh: str = ""
    category: str = Field(default="", index=True)
    category_zh: str = ""
    item_group_id: str = Field(default="", index=True)
    attributes: dict = Field(default_factory=dict, sa_column=Column(JSON))
    sections: dict = Field(default_factory=dict, sa_column=Column(JSON))
    text_hash: str = ""
    data_hash: str = ""
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def effective_price(self) -> float:
        return self.sale_price if self.sale_price is not None else self.price

    @property
    def group(self) -> str:
        return self.item_group_id or self.id

    def field_value(self, name: str) -> str:
        """A feed field or product_detail attribute as text; "" when the record does not state it."""
        if name in self.attributes:
            return str(self.attributes[name])
        if name in PRODUCT_FIELDS:
            value = getattr(self, name)
            if name in ("price", "sale_price"):
                return "" if value is None else f"{value:.2f} {self.currency}"
            return "" if value is None else str(value)
        return ""


# The feed fields a fact or a comparison may cite (besides product_detail attributes).
PRODUCT_FIELDS = ("title", "description", "price", "sale_price", "availability", "brand", "gtin", "mpn", "color",
                  "size", "material", "pattern", "product_type")


class CatalogAttribute(SQLModel, table=True):
    __tablename__ = "catalog_attribute"

    id: int | None = Field(default=None, primary_key=True)
    product_id: str = Field(index=True)
    section: str = ""
    name: str = Field(index=True)
    value: str


class CatalogState(SQLModel, table=True):
    __tablename__ = "catalog_state"

    key: str = Field(primary_key=True)
    value: str


STATE_TABLE = CatalogState.__table__  # type: ignore[attr-defined]
# Read on every message: a Core statement on a pooled connection costs about a fifth of an ORM session's get
# (0.03 against 0.15 ms here), which a cache hit, a whole answer in about a millisecond, notices.
_VERSION_QUERY = select(STATE_TABLE.c.value).where(STATE_TABLE.c.key == "version")


def stored_version(db: Database) -> int:
    """The catalog version as stored (0 while no ingest ever changed anything), any process's."""
    with db.engine.connect() as connection:
        value = connection.execute(_VERSION_QUERY).scalar()
    return int(value) if value is not None else 0


PRODUCT_TABLE = CatalogProduct.__table__  # type: ignore[attr-defined]
ATTRIBUTE_TABLE = CatalogAttribute.__table__  # type: ignore[attr-defined]
TABLES = [PRODUCT_TABLE, ATTRIBUTE_TABLE, CatalogState.__table__, *log.TABLES]  # type: ignore[attr-defined]


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    embedded: int = 0  # products whose text changed and were embedded (a price/stock-only change embeds none)
    bad: list[BadRow] = field(default_factory=list)
    version: int = 0
    format: str = ""

    def summary(self) -> str:
        return (f"{self.format} feed: {self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
                f"{self.removed} removed, {self.embedded} embedded, {len(self.bad)} bad row(s); "
                f"catalog version {self.version}")

    def as_dict(self) -> dict:
        return {"format": self.format, "added": self.added, "updated": self.updated, "unchanged": self.unchanged,
                "removed": self.removed, "embedded": self.embedded, "version": self.version,
                "bad": [{"line": b.line, "reason": b.reason} for b in self.bad]}


def product_text(product: CatalogProduct | ProductRecord, language: str) -> str:
    """The text embedded and indexed for ``product`` in ``language`` (its Chinese text when it has any)."""
    details = " ".join(f"{name} {value}." for name, value in product.attributes.items())
    facets = " ".join(v for v in (product.brand, product.color, product.size, product.material, product.pattern) if v)
    if language == "zh" and product.title_zh:
        category = product.product_type_zh.split(">")[-1].strip()
        return f"{product.title_zh}。{category}。{product.description_zh} {facets}"
    category = product.product_type.split(">")[-1].strip()
    return f"{product.title}. {category}. {product.description} {facets}. {details}"


@dataclass
class _Space:
    """One language's searchable texts: product ids, vectors, and the lexical index."""

    ids: list[str]
    vectors: np.ndarray
    index: HybridIndex | None
    position: dict[str, int]


class Catalog:
    """The shop's products: ingest a feed, read records and facets, and the per-language search spaces."""

    def __init__(self, db: Database, encoder: Encoder, chroma_path: Path | None = None, url: str = "",
                 prefix: str = "tandem_catalog"):
        self.db, self.encoder = db, encoder
        SQLModel.metadata.create_all(db.engine, tables=TABLES)
        self._client = chroma.open_client(chroma_path, url)
        self._prefix = prefix
        self._collection = chroma.open_collection(self._client, f"{prefix}_{EMBEDDED}", encoder)
        self._lock = threading.RLock()
        self.products: dict[str, CatalogProduct] = {}
        self._spaces: dict[str, _Space] | None = None
        self._loaded_version = -1
        self._reload()

    # ---- version ------------------------------------------------------------------------
    def stored_version(self) -> int:
        return stored_version(self.db)

    def refresh(self) -> int:
        """The catalog version (any process's ingest), read once, reloading this copy when another process changed
        it. Called once per message (catalog.live); everything after reads :attr:`loaded_version`."""
        current = self.stored_version()
        if current != self._loaded_version:
            self._reload()
        return current

    @property
    def loaded_version(self) -> int:
        """The version of the records this copy holds; no database read."""
        return self._loaded_version

    @property
    def version(self) -> int:
        """The catalog version as stored now (a database read, and a reload when it changed)."""
        return self.refresh()

    # ---- ingest -------------------------------------------------------------------------
    def ingest(self, path: Path, replace: bool = False, workers: int = 1) -> IngestReport:
        """Upsert the feed's products (idempotent by id); with ``replace``, delete the products the feed lacks
        (except those named by its bad rows). Bad rows are reported by line; the good ones are stored. ``workers``:
        how many encoder batches run at once (the CLI gives it the machine's cores).

        In bulk, because a feed is thousands of rows: new products and every attribute row go in as multi-row
        INSERTs (an ORM merge per row flushed and selected once per product: 14 s of 10,000), and every text to
        embed is one encoder call (batches sorted by length, duplicates once)."""
        feed = read_feed(Path(path))
        report = IngestReport(bad=list(feed.bad), format=feed.format)
        with self._lock, self.db.session() as session:
            existing = {p.id: p for p in session.exec(select(CatalogProduct)).all()}
            vectors_stored = self._embedded_ids()
            to_embed: list[tuple[CatalogProduct | ProductRecord, str]] = []  # (product, its text hash)
            new_rows: list[dict] = []
            attribute_rows: list[dict] = []
            updated_ids: list[str] = []
            now = datetime.now(UTC)
            with session.no_autoflush:
                for record in feed.products:
                    old = existing.get(record.id)
                    data_hash, text_hash = record.data_hash(), record.text_hash()
                    if old is not None and old.data_hash == data_hash:
                        report.unchanged += 1
                        if record.id not in vectors_stored:
                            to_embed.append((old, old.text_hash))  # its vectors are gone (a new or wiped Chroma store)
                        continue
                    if old is None or old.text_hash != text_hash:  # before the merge below overwrites old's
                        to_embed.append((record, text_hash))
                    columns = _columns(record, text_hash, data_hash, now)
                    if old is None:
                        report.added += 1
                        new_rows.append(columns)
                    else:
                        report.updated += 1
                        updated_ids.append(record.id)
                        session.merge(CatalogProduct(**columns))  # found in the session (loaded above): no SELECT
                    attribute_rows.extend({"product_id": record.id, "section": record.sections.get(name, ""),
                                           "name": name, "value": value} for name, value in record.attributes.items())
            for chunk in _chunks(updated_ids, 500):
                session.exec(delete(CatalogAttribute).where(CatalogAttribute.product_id.in_(chunk)))  # type: ignore[attr-defined]
            for rows in _chunks(new_rows, 1000):
                session.execute(insert(PRODUCT_TABLE), rows)
            for rows in _chunks(attribute_rows, 2000):
                session.execute(insert(ATTRIBUTE_TABLE), rows)
            removed: list[str] = []
            if replace:
                keep = {p.id for p in feed.products} | feed.bad_ids
                removed = [pid for pid in existing if pid not in keep]
                for chunk in _chunks(removed, 500):
                    session.exec(delete(CatalogProduct).where(CatalogProduct.id.in_(chunk)))  # type: ignore[attr-defined]
                    session.exec(delete(CatalogAttribute).where(CatalogAttribute.product_id.in_(chunk)))  # type: ignore[attr-defined]
                report.removed = len(removed)
            # Vectors first, rows committed after: a crash in between leaves rows that a re-run embeds again
            self._embed(to_embed, workers)
            if removed:
                self._collection.delete(ids=removed)
            self._drop_obsolete_collections()
            report.embedded = len(to_embed)
            version = _read_version(session)
            if report.added or report.updated or report.removed:
                version += 1
                session.merge(CatalogState(key="version", value=str(version)))
            session.commit()
            report.version = version
        log.record_import(self.db, str(path), report.as_dict(), replace=replace)
        self._reload()
        return report

    def log_search(self, query: str, kind: str, filters: str = "", top_ids: list[str] | None = None,
                   relaxed: str = "", session_id: str = "") -> None:
        """One search the chat made, for the console's search log and null-search report (:mod:`catalog.log`)."""
        log.log_search(self.db, query, kind, filters, top_ids, relaxed, session_id)

    def by_gtin(self, code: str) -> list[CatalogProduct]:
        """The products whose GTIN is ``code``, read as GTIN-8/12/13/14: a UPC-A and its EAN-13 with a leading 0
        (and a GTIN-14 with leading zeros) are the same number."""
        digits = code.strip()
        if not digits.isdigit():
            return []
        key = digits.lstrip("0")
        return [p for p in self.products.values() if p.gtin and p.gtin.lstrip("0") == key]

    def _embed(self, products: list[tuple[CatalogProduct | ProductRecord, str]], workers: int) -> None:
        """Each product's English text embedded in one encoder call (a text that two products share once), then
        written to the collection with its text hash."""
        if not products:
            return
        texts = [product_text(p, EMBEDDED) for p, _ in products]
        distinct = list(dict.fromkeys(texts))
        vectors = self.encoder.encode_passages(distinct, workers=workers)
        row_of = {text: n for n, text in enumerate(distinct)}
        step = min(256, chroma.batch_size(self._client))
        for start in range(0, len(products), step):
            chunk, docs = products[start:start + step], texts[start:start + step]
            self._collection.upsert(ids=[p.id for p, _ in chunk], documents=docs,
                                    metadatas=[{"text_hash": text_hash} for _, text_hash in chunk],
                                    embeddings=vectors[[row_of[text] for text in docs]])

    def _drop_obsolete_collections(self) -> None:
        """Delete what older catalogs stored and nothing reads now (:data:`OBSOLETE_COLLECTIONS`), once."""
        names = {c if isinstance(c, str) else c.name for c in self._client.list_collections()}
        for suffix in OBSOLETE_COLLECTIONS:
            if f"{self._prefix}_{suffix}" in names:
                self._client.delete_collection(f"{self._prefix}_{suffix}")

    # ---- reading ------------------------------------------------------------------------
    def _embedded_ids(self) -> set[str]:
        """The ids of the products whose vectors the collection holds (ids only, in pages)."""
        ids: set[str] = set()
        page = 5000
        while True:
            got = self._collection.get(include=[], limit=page, offset=len(ids))["ids"]
            ids.update(got)
            if len(got) < page:
                return ids

    def _reload(self) -> None:
        """The rows and the version; the search spaces are built on their first use (:attr:`spaces`)."""
        with self._lock:
            with self.db.session() as session:
                version = _read_version(session)
                products = {p.id: p for p in session.exec(select(CatalogProduct)).all()}
            self.products, self._spaces, self._loaded_version = products, None, version

    @property
    def spaces(self) -> dict[str, _Space]:
        """Per language, the loaded products' texts for BM25 and their vectors, built on first use after a reload:
        `tandem catalog ingest`, a process of its own that never searches, skips it (4.5 s of 10,000 products)."""
        with self._lock:
            if self._spaces is None:
                self._spaces = self._build_spaces()
            return self._spaces

    def _build_spaces(self) -> dict[str, _Space]:
        got = chroma.read_all(self._collection)
        vectors = {i: e for i, e in zip(got["ids"], got["embeddings"])}
        ids = [pid for pid in self.products if pid in vectors]
        matrix = (np.asarray([vectors[pid] for pid in ids], dtype=np.float32) if ids
                  else np.zeros((0, self.encoder.dim), dtype=np.float32))
        position = {pid: i for i, pid in enumerate(ids)}
        spaces = {}
        for lang in LANGUAGES:  # the same products and vectors; each language's own texts for BM25
            texts = [product_text(self.products[pid], lang) for pid in ids]
            index = (HybridIndex(texts, ids, matrix, params=FusionParams(head_weight=0.0, starter_examples=False))
                     if ids else None)
            spaces[lang] = _Space(ids, matrix, index, position)
        return spaces

    def __len__(self) -> int:
        return len(self.products)

    def get(self, product_id: str) -> CatalogProduct | None:
        return self.products.get(product_id)

    def facets(self) -> dict[str, dict[str, int]]:
        """Per facet (category, color, size, material, brand, availability), each value and its product count;
        every product_detail attribute name with its count under "attributes"."""
        out: dict[str, dict[str, int]] = {name: {} for name in ("category", "color", "size", "material", "brand",
                                                                 "availability")}
        for product in self.products.values():
            for name in out:
                value = getattr(product, name)
                if value:
                    out[name][value] = out[name].get(value, 0) + 1
        with self.db.session() as session:
            names = session.exec(select(CatalogAttribute.name)).all()
        out["attributes"] = {}
        for name in names:
            out["attributes"][name] = out["attributes"].get(name, 0) + 1
        return out


def _read_version(session: Session) -> int:
    row = session.get(CatalogState, "version")
    return int(row.value) if row else 0


def _columns(record: ProductRecord, text_hash: str, data_hash: str, updated_at: datetime) -> dict:
    """The ``catalog_product`` row of ``record``, as column values."""
    return dict(
        id=record.id, title=record.title, description=record.description, title_zh=record.title_zh,
        description_zh=record.description_zh, link=record.link, image_link=record.image_link, price=record.price,
        sale_price=record.sale_price, currency=record.currency, availability=record.availability, brand=record.brand,
        gtin=record.gtin, mpn=record.mpn, color=record.color, size=record.size, material=record.material,
        pattern=record.pattern, product_type=record.product_type, product_type_zh=record.product_type_zh,
        category=record.category, category_zh=record.category_zh, item_group_id=record.item_group_id,
        attributes=dict(record.attributes), sections=dict(record.sections), text_hash=text_hash, data_hash=data_hash,
        updated_at=updated_at)


def _chunks(items: list, size: int) -> list[list]:
    return [items[start:start + size] for start in range(0, len(items), size)]
