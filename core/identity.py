"""Signed customer identity: the one thing that unlocks a customer's orders, history and priority.

The shop's backend, which knows who is signed in, issues a short-lived token (a JWT, HS256, with ``sub`` the
customer id and ``exp`` required) and the front end sends it as ``X-Tandem-Customer``. Tandem only checks it.
An unsigned ``user_id`` (or OpenAI ``user``) is a label for logs and limits, never an identity.

The key is ``TANDEM_IDENTITY_SECRET``; when it is empty, a random key is made once and kept in
``$TANDEM_HOME/identity.key`` (mode 0600), so `make demo` and `tandem identity token` agree with no setup.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import jwt

from core.errors import TandemError

ALGORITHM = "HS256"
HEADER = "x-tandem-customer"
LEEWAY_S = 10  # clocks of the shop's backend and of Tandem may differ by a few seconds
KEY_FILE = "identity.key"


def identity_key(secret: str, home: Path) -> str:
    """The configured secret, or the one kept in ``home`` (made on first use)."""
    if secret:
        return secret
    path = home / KEY_FILE
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    home.mkdir(parents=True, exist_ok=True)
    made = secrets.token_urlsafe(32)
    try:  # O_EXCL: two processes starting together agree on the first one's key
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(made)
    return made


def issue_token(customer: str, key: str, ttl_s: int = 3600, now: float | None = None) -> str:
    """What the shop's backend sends for a signed-in customer (tests and `tandem identity token` use it too)."""
    if not customer:
        raise TandemError("a customer token needs a customer id")
    issued = int(now if now is not None else time.time())
    return jwt.encode({"sub": customer, "iat": issued, "exp": issued + int(ttl_s)}, key, algorithm=ALGORITHM)


class IdentityError(TandemError):
    """A customer token that was sent but cannot be trusted (bad signature, expired, malformed)."""


def verify_token(token: str, key: str, max_ttl_s: int) -> str:
    """The customer id of a valid token; raises :class:`IdentityError` with a one-line reason otherwise."""
    try:
        claims = jwt.decode(token, key, algorithms=[ALGORITHM], leeway=LEEWAY_S,
                            options={"require": ["sub", "exp", "iat"]})
    except jwt.ExpiredSignatureError:
        raise IdentityError("the customer token has expired; ask the shop's backend for a new one") from None
    except jwt.InvalidTokenError as exc:
        raise IdentityError(f"the customer token is not valid ({exc})") from None
    if int(claims["exp"]) - int(claims["iat"]) > max_ttl_s + LEEWAY_S:
        raise IdentityError(f"the customer token lives longer than TANDEM_IDENTITY_MAX_TTL_S ({max_ttl_s} s)")
    customer = claims["sub"]
    if not isinstance(customer, str) or not customer.strip() or len(customer) > 128:
        raise IdentityError("the customer token's subject must be a customer id of 1 to 128 characters")
    return customer
