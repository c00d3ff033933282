"""API keys with scopes, kept as SHA-256 hashes: create, list, revoke, and look one up as a request presents it.

A key reads ``tdm_<id>_<secret>``: the id finds the row, the secret is compared with its hash in constant time.
Only ``create`` ever sees the whole key; it is shown once and cannot be read back.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlmodel import col, func, select

from core.errors import TandemError
from storage.db import Database
from storage.tables import ApiKey, utcnow

# agent: the operators' inbox (/api/v1/inbox: claim, reply, release a conversation a person holds)
SCOPES = ("chat", "kb", "agent", "admin")
PREFIX = "tdm"


@dataclass(frozen=True)
class KeyGrant:
    """A presented key that checked out: who it is and what it may do."""

    key_id: str
    name: str
    scopes: frozenset[str]


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def parse_scopes(scopes: str | list[str]) -> str:
    names = [s.strip().lower() for s in (scopes.split(",") if isinstance(scopes, str) else scopes) if s.strip()]
    unknown = sorted(set(names) - set(SCOPES))
    if unknown or not names:
        raise TandemError(f"unknown scope {', '.join(unknown) or '(none given)'}; use one or more of: "
                          f"{', '.join(SCOPES)}")
    return ",".join(s for s in SCOPES if s in names)


def create_key(db: Database, name: str, scopes: str | list[str] = "chat") -> str:
    """Make a key; returns the whole key (the only time it exists outside the caller's hands)."""
    kept_scopes = parse_scopes(scopes)
    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    with db.session() as session:
        session.add(ApiKey(id=key_id, name=name.strip()[:80], scopes=kept_scopes, secret_sha256=_digest(secret)))
        session.commit()
    return f"{PREFIX}_{key_id}_{secret}"


def list_keys(db: Database) -> list[ApiKey]:
    with db.session() as session:
        return list(session.exec(select(ApiKey).order_by(col(ApiKey.created_at))).all())


def revoke_key(db: Database, key_id: str) -> bool:
    with db.session() as session:
        row = session.get(ApiKey, key_id)
        if row is None or row.revoked_at is not None:
            return False
        row.revoked_at = utcnow()
        session.add(row)
        session.commit()
        return True


def active_key_count(db: Database) -> int:
    with db.session() as session:
        return int(session.exec(select(func.count()).select_from(ApiKey)
                                .where(col(ApiKey.revoked_at).is_(None))).one())


def key_name(db: Database, key_id: str) -> str:
    """The name a key was created with ("" for an unknown id): who an agent key speaks for by default."""
    with db.session() as session:
        row = session.get(ApiKey, key_id)
    return row.name if row is not None else ""


def check_key(db: Database, presented: str) -> KeyGrant | None:
    """The grant of a presented key, or None (unknown, revoked, or a wrong secret)."""
    prefix, _, rest = presented.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not key_id or not secret:
        return None
    with db.session() as session:
        row = session.get(ApiKey, key_id)
    if row is None or row.revoked_at is not None:
        return None
    if not hmac.compare_digest(_digest(secret), row.secret_sha256):
        return None
    return KeyGrant(key_id=row.id, name=row.name, scopes=frozenset(row.scopes.split(",")))
