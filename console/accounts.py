"""Operator accounts of the console: a name and a bcrypt hash of its password (table ``operators``).

Managed with `tandem operators add|list|set-password|disable|enable|remove`. While no account exists the console
accepts the shared password ``TANDEM_CONSOLE_PASSWORD`` for the fixed name ``operator`` (see console/auth.py);
the first account ends that. A disabled account still counts as an account (disabling every account does not turn
the shared password back on); removing every account does.

Process-wide: the dummy bcrypt hash is made once, so a sign-in with an unknown name costs the same as a real check.
"""

from __future__ import annotations

import functools
import re

import bcrypt
from sqlmodel import col, select

from core.errors import TandemError
from storage.db import Database
from storage.tables import Operator

MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_BYTES = 72  # bcrypt reads no more than 72 bytes (bcrypt 5 refuses longer ones)
BCRYPT_ROUNDS = 12  # bcrypt's default cost: about 0.2-0.3 s per check on one core
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,79}")


class AccountError(TandemError):
    """An account cannot be added or changed; the message says why in one line."""


def name_problem(name: str) -> str:
    """Why ``name`` cannot be an account name ("" when it can)."""
    if not NAME_PATTERN.fullmatch(name or ""):
        return (f"'{name}' is not an operator name: use 1-80 letters, digits, '.', '_', '@' or '-', starting with a "
                "letter or digit")
    return ""


def password_problem(password: str) -> str:
    """Why ``password`` cannot be an account's password ("" when it can)."""
    if not password:
        return "the password is empty: choose one of at least 8 characters"
    if len(password) < MIN_PASSWORD_CHARS:
        return f"the password is too short ({len(password)} characters): use at least {MIN_PASSWORD_CHARS}"
    if len(password.encode()) > MAX_PASSWORD_BYTES:
        return f"the password is too long: bcrypt uses at most {MAX_PASSWORD_BYTES} bytes (UTF-8)"
    return ""


def hash_password(password: str) -> str:
    if problem := password_problem(password):
        raise AccountError(problem)
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(BCRYPT_ROUNDS)).decode()


@functools.cache
def _dummy_hash() -> bytes:
    # Made once per process with the same cost as real hashes, so an unknown name costs one bcrypt check too.
    return bcrypt.hashpw(b"no account has this password", bcrypt.gensalt(BCRYPT_ROUNDS))


def _check(password: str, hashed: bytes) -> bool:
    encoded = (password or "").encode()
    if not encoded or len(encoded) > MAX_PASSWORD_BYTES:
        bcrypt.checkpw(b"-", hashed)  # never right, but costs the same as a real check
        return False
    try:
        return bcrypt.checkpw(encoded, hashed)
    except ValueError:  # a malformed hash in the table
        return False


def add_operator(db: Database, name: str, password: str) -> Operator:
    if problem := name_problem(name):
        raise AccountError(problem)
    hashed = hash_password(password)
    with db.session() as session:
        if session.get(Operator, name) is not None:
            raise AccountError(f"operator '{name}' exists already: change its password with "
                               f"`tandem operators set-password {name}`")
        account = Operator(name=name, password_bcrypt=hashed)
        session.add(account)
        session.commit()
        return account


def _existing(session, name: str) -> Operator:
    account = session.get(Operator, name)
    if account is None:
        raise AccountError(f"no operator '{name}' (see `tandem operators list`)")
    return account


def set_password(db: Database, name: str, password: str) -> None:
    hashed = hash_password(password)
    with db.session() as session:
        account = _existing(session, name)
        account.password_bcrypt = hashed
        session.add(account)
        session.commit()


def set_disabled(db: Database, name: str, disabled: bool = True) -> None:
    """A disabled account cannot sign in; a console session it has open ends at its next page load."""
    with db.session() as session:
        account = _existing(session, name)
        account.disabled = disabled
        session.add(account)
        session.commit()


def remove_operator(db: Database, name: str) -> None:
    with db.session() as session:
        session.delete(_existing(session, name))
        session.commit()


def list_operators(db: Database) -> list[Operator]:
    with db.session() as session:
        return list(session.exec(select(Operator).order_by(col(Operator.name))))


def has_accounts(db: Database) -> bool:
    """Whether any account exists (disabled ones included): then the shared console password no longer works."""
    with db.session() as session:
        return session.exec(select(Operator.name).limit(1)).first() is not None


def is_active(db: Database, name: str) -> bool:
    with db.session() as session:
        account = session.get(Operator, name)
        return account is not None and not account.disabled


def verify(db: Database, name: str, password: str) -> bool:
    """True when ``name`` is an enabled account and ``password`` its password.

    Exactly one bcrypt check runs whether the name exists or not (a dummy hash stands in for a missing one), so the
    time a refusal takes does not tell whether a name is an account.
    """
    with db.session() as session:
        account = session.get(Operator, name) if name else None
    hashed = account.password_bcrypt.encode() if account is not None and account.password_bcrypt else _dummy_hash()
    ok = _check(password, hashed)
    return ok and account is not None and not account.disabled
