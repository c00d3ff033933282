"""Who a conversation's customer is, for an operator: the signed customer and their orders, or nobody.

One reading for every place an operator looks (the console's inbox page and the agent API, both through
chains/conversation.py ``Conversations.customer``). A customer is signed when the session's owner, written by the
service as it opened the session, is ``customer:<id>``: the front end verified a signed token (core/identity.py) for
that id. An unsigned ``user_id`` is a label anyone can send, so it is never read as an identity and unlocks no orders.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from storage.db import Database
from storage.tables import ChatSession, Order, table_of

SIGNED_OWNER = "customer:"  # ChatSession.owner of a session opened with a verified token (chains/schema.py owner)
# What an operator sees of an order: everything but the e-mail address (the operator answers in the chat).
ORDER_COLUMNS = ("order_id", "created_at", "status", "items", "total", "currency", "carrier", "tracking_number", "eta")


def signed_owner(customer: str) -> str:
    """The session owner a signed customer's sessions carry."""
    return f"{SIGNED_OWNER}{customer}"


def signed_customers(db: Database, session_ids: Iterable[str]) -> dict[str, str]:
    """Each of the sessions' signed customer id; a session of a guest (or one never stored) is left out."""
    wanted = list(dict.fromkeys(session_ids))
    if not wanted:
        return {}
    table = table_of(ChatSession)
    with db.engine.connect() as conn:
        rows = conn.execute(select(table.c.id, table.c.owner).where(table.c.id.in_(wanted))).all()
    return {sid: owner.removeprefix(SIGNED_OWNER) for sid, owner in rows
            if isinstance(owner, str) and owner.startswith(SIGNED_OWNER) and len(owner) > len(SIGNED_OWNER)}


def orders_of(db: Database, customer: str) -> list[dict[str, Any]]:
    """A customer's orders, newest first, as ORDER_COLUMNS (no e-mail address)."""
    if not customer:
        return []
    table = table_of(Order)
    with db.engine.connect() as conn:
        rows = conn.execute(select(*(table.c[name] for name in ORDER_COLUMNS))
                            .where(table.c.user_id == customer).order_by(table.c.created_at.desc())).all()
    return [dict(row._mapping) for row in rows]


def customer_of(db: Database, session_id: str) -> dict[str, Any] | None:
    """The conversation's signed customer for an operator: ``{"id", "signed": True, "orders": [...]}``; None for a
    guest (identity unverified: no id, no orders)."""
    customer = signed_customers(db, [session_id]).get(session_id)
    if not customer:
        return None
    return {"id": customer, "signed": True, "orders": orders_of(db, customer)}
