"""Demo data: the orders the order-status tool reads."""

from __future__ import annotations

import csv
from pathlib import Path

from sqlmodel import select

from storage.db import session_scope
from storage.tables import Order

DEMO_ORDERS = Path(__file__).resolve().parent.parent / "knowledge" / "demo" / "orders.csv"


def seed_orders(path: Path = DEMO_ORDERS) -> int:
    """Insert the demo orders when the table is empty; returns how many were added."""
    with session_scope() as session:
        if session.exec(select(Order).limit(1)).first() is not None:
            return 0
        with path.open(newline="", encoding="utf-8") as handle:
            rows = [Order(**{**row, "total": float(row.get("total") or 0)}) for row in csv.DictReader(handle)]
        session.add_all(rows)
        session.commit()
        return len(rows)
