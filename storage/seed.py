"""Demo data: the orders the order-status tool reads."""

from __future__ import annotations

import csv
from pathlib import Path

from sqlmodel import select

from storage.db import Database
from storage.tables import Order

DEMO_ORDERS = Path(__file__).resolve().parent.parent / "knowledge" / "demo" / "orders.csv"


def seed_orders(db: Database, path: Path = DEMO_ORDERS) -> int:
    """Insert the demo orders when the table is empty; returns how many were added."""
    with db.session() as session:
        if session.exec(select(Order).limit(1)).first() is not None:
            return 0
        with path.open(newline="", encoding="utf-8") as handle:
            rows = [Order.model_validate({**row, "total": float(row.get("total") or 0)}) for row in csv.DictReader(handle)]
        session.add_all(rows)
        session.commit()
        return len(rows)
