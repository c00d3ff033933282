"""The catalog as a serving process holds it: opened on first need, and absent while nothing was ever ingested.

A process that serves chat builds one :class:`LiveCatalog`. While the catalog's version is 0 (no ingest ever changed
anything) it opens no Chroma collection and answers ``None``: the chain then behaves as it did without a catalog.
Once some ingest (this process's or another's, `tandem catalog ingest`) has stored products, the next message opens
the catalog; from then on every message reads the version (one primary-key lookup) and the catalog reloads itself when
another process changed it, so a changed price is in the very next answer.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlmodel import SQLModel

from catalog.search import ProductSearch
from catalog.store import TABLES, Catalog, stored_version
from core.encoders import Encoder
from storage.db import Database


class LiveCatalog:
    def __init__(self, db: Database, encoder: Encoder, chroma_path: Path | None = None, url: str = ""):
        self.db, self.encoder, self.chroma_path, self.url = db, encoder, chroma_path, url
        SQLModel.metadata.create_all(db.engine, tables=TABLES)
        self._search: ProductSearch | None = None
        self._lock = threading.Lock()

    def open(self) -> Catalog:
        """The catalog itself, opened now if it was not (to ingest into it)."""
        with self._lock:
            if self._search is None:
                self._search = ProductSearch(Catalog(self.db, self.encoder, chroma_path=self.chroma_path, url=self.url))
            return self._search.catalog

    def current(self) -> ProductSearch | None:
        """Search over the catalog as it is now; None while it has no products (nothing to answer from)."""
        if self._search is None:
            if not stored_version(self.db):
                return None  # never ingested: no Chroma collection is opened for it
            self.open()
        search = self._search
        assert search is not None
        search.catalog.refresh()  # the one version read of this message; reloads when another process changed it
        return search if len(search.catalog) else None
