"""First-start work shared by `tandem init`, `make demo` and the apps: tables, thresholds, demo data."""

from __future__ import annotations

from typing import Iterator


def bootstrap(seed: bool = True) -> Iterator[str]:
    from storage.db import init_db
    from storage.seed import seed_orders
    from storage.settings_store import ensure_seeded
    from tandem.settings import ensure_home

    ensure_home()
    engine = init_db()
    yield f"database ready: {engine.url.render_as_string(hide_password=True)}"
    thresholds = ensure_seeded()
    yield f"router settings version {thresholds.version}: tau={thresholds.route_threshold}"
    if seed:
        added = seed_orders()
        yield f"demo orders added: {added}" if added else "demo orders already present"
        try:
            from knowledge.demo_seed import seed_demo_kb
        except ModuleNotFoundError:
            return
        yield seed_demo_kb()
