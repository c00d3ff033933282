"""First-start work shared by `tandem init`, `make demo` and the apps: tables, policy, demo orders, demo KB."""

from __future__ import annotations

from collections.abc import Iterator

from core.policy import Thresholds
from core.settings import Settings, ensure_home
from knowledge.base import KnowledgeBase
from knowledge.demo_kb import seed_demo_kb
from storage import policy_store
from storage.db import Database, open_database
from storage.seed import seed_orders


def prepare_storage(settings: Settings, db: Database | None = None) -> Database:
    """The data directory and the database, ready to use (tables created, policy seeded)."""
    if not settings.database_url or settings.database_url.startswith("sqlite"):
        ensure_home(settings)
    db = (db or open_database(settings.db_url)).init()
    policy_store.ensure_seeded(db, Thresholds.defaults(settings))
    return db


def bootstrap(settings: Settings, kb: KnowledgeBase | None = None, seed: bool = True,
              db: Database | None = None) -> Iterator[str]:
    """Prepare storage, then seed demo orders and (given a KB) the demo knowledge base; one line per step."""
    db = prepare_storage(settings, db)
    yield f"database ready: {db.display_url}"
    yield f"router settings version {policy_store.current(db).version}: tau={policy_store.current(db).route_threshold}"
    if seed:
        added = seed_orders(db)
        yield f"demo orders added: {added}" if added else "demo orders already present"
        if kb is not None:
            yield seed_demo_kb(kb)
