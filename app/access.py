"""Who is calling, and may they: one access check for every front end (Tandem's API, the OpenAI API, the chat UI).

A call is a :class:`Caller`: the client address (X-Forwarded-For only from a trusted proxy), the API key it
presented and the key's scopes, and the customer a signed token names. The rules:

- An API key is ``Authorization: Bearer <key>``: a key from `tandem keys create` (scopes chat, kb, agent, admin), or the
  older single ``TANDEM_API_TOKEN`` (an admin key). A key that is sent must be right (401).
- A caller beyond loopback must send a key (401). On loopback, with no key configured at all, the demo is open to
  chat; once any key exists, every caller needs one.
- ``chat`` covers /api/v1/chat, /api/v1/feedback, /api/v1/sessions/* and /v1; ``kb`` covers /api/v1/kb/*; ``agent``
  covers the operators' inbox /api/v1/inbox*; ``admin`` covers everything.
  /metrics and /api/docs are open on loopback, else they need a key.
- The customer is ``X-Tandem-Customer: <signed token>`` (core.identity). A token that is sent must verify (401).
- Limits (chains.ratelimit; app.serving.over_limit) count the address, the key, the customer and the total,
  before anything is read.
"""

from __future__ import annotations

import hmac
import ipaddress
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from chains.ratelimit import LimitKeys
from core.exposure import is_loopback
from core.identity import HEADER as CUSTOMER_HEADER
from core.identity import IdentityError, identity_key, verify_token
from core.settings import Settings
from storage.api_keys import active_key_count, check_key
from storage.db import Database

LEGACY_KEY_ID = "token"  # TANDEM_API_TOKEN, an admin key
SCOPE_OF_PATH = (("/api/v1/kb/", "kb"), ("/api/v1/inbox", "agent"), ("/api/v1/", "chat"), ("/v1/", "chat"))
KEY_COUNT_TTL_S = 5.0  # how long "does any key exist" is remembered (a new key takes effect within it)


class AccessDenied(Exception):
    """401/403: answered in the shape of the path's API (app.server.error_response)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message
        self.headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None


@dataclass(frozen=True)
class Caller:
    address: str
    key_id: str = ""
    scopes: frozenset[str] = field(default_factory=frozenset)
    customer: str = ""

    @property
    def limit_keys(self) -> LimitKeys:
        return LimitKeys(address=self.address, key_id=self.key_id, customer=self.customer)

    @property
    def client(self) -> str:
        return self.limit_keys.client

    @property
    def operator(self) -> bool:
        """An admin key: the caller may see the scores and reasons of an answer (operators' view)."""
        return "admin" in self.scopes

    def may(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes


class Gate:
    """The access rules of one app, over its settings and its database (``db()``: None until the runtime is up)."""

    def __init__(self, settings: Settings, db: Callable[[], Database | None]):
        self.settings, self.db = settings, db
        self._key_count: tuple[float, int] = (0.0, 0)
        self._lock = threading.Lock()

    @cached_property
    def trusted_proxies(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        nets = []
        for part in self.settings.trusted_proxies.split(","):
            if part.strip():
                nets.append(ipaddress.ip_network(part.strip(), strict=False))
        return tuple(nets)

    @cached_property
    def identity_key(self) -> str:
        return identity_key(self.settings.identity_secret, self.settings.home)

    def keys_configured(self) -> bool:
        if self.settings.api_token:
            return True
        db = self.db()
        if db is None:
            return False
        now = time.monotonic()
        with self._lock:
            at, count = self._key_count
            if now - at > KEY_COUNT_TTL_S:
                try:
                    count = active_key_count(db)
                except Exception:  # a missing table reads as "no keys"; the database's own check reports it
                    count = 0
                self._key_count = (now, count)
        return count > 0

    # --- the parts of a caller -----------------------------------------------------------------------
    def address(self, peer: str, forwarded_for: str) -> str:
        """The client's address: the peer's, or, when the peer is a trusted proxy, the right-most address in
        X-Forwarded-For that is not itself a trusted proxy (left of it, anything may be forged)."""
        if not forwarded_for or not self._trusted(peer):
            return peer or "unknown"
        hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
        for hop in reversed(hops):
            if not self._trusted(hop):
                return hop
        return hops[0] if hops else peer

    def _trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.trusted_proxies)

    def key(self, authorization: str) -> tuple[str, frozenset[str]] | None:
        """(key id, scopes) of a presented Bearer key; None when none was sent. A wrong key raises 401."""
        scheme, _, sent = (authorization or "").partition(" ")
        sent = sent.strip()
        if not authorization:
            return None
        if scheme.lower() != "bearer" or not sent:
            raise AccessDenied(401, "send the API key as 'Authorization: Bearer <key>'")
        token = self.settings.api_token
        if token and _same(sent, token):
            return LEGACY_KEY_ID, frozenset({"admin"})
        db = self.db()
        grant = check_key(db, sent) if db is not None and sent.startswith("tdm_") else None
        if grant is None and not self.keys_configured():
            # The open demo (loopback, no key at all): there is nothing to check a key against, and OpenAI SDKs
            # always send one ("unused"). The caller is anonymous; beyond loopback it is refused all the same.
            return None
        if grant is None:
            raise AccessDenied(401, "wrong, revoked or unknown API key; send 'Authorization: Bearer <key>'")
        return grant.key_id, grant.scopes

    def customer(self, token: str) -> str:
        """The customer a signed token names; "" when none was sent. A token that does not verify raises 401."""
        if not token:
            return ""
        try:
            return verify_token(token.strip(), self.identity_key, self.settings.identity_max_ttl_s)
        except IdentityError as exc:
            raise AccessDenied(401, str(exc)) from None

    # --- the whole check -----------------------------------------------------------------------------
    def caller(self, *, path: str, peer: str, headers: dict[str, str]) -> Caller:
        """The caller of an HTTP request to ``path``, or AccessDenied (401 no or wrong key, 403 wrong scope)."""
        address = self.address(peer, headers.get("x-forwarded-for", ""))
        found = self.key(headers.get("authorization", ""))
        key_id, scopes = found if found is not None else ("", frozenset())
        if found is None and (self.keys_configured() or not is_loopback(address)):
            raise AccessDenied(401, "an API key is required; send 'Authorization: Bearer <key>' (keys come from "
                                    "`tandem keys create NAME --scope chat`)")
        if found is None:
            scopes = frozenset({"chat"})  # the open demo on loopback
        needed = next((scope for prefix, scope in SCOPE_OF_PATH if path.startswith(prefix)), "")
        if needed and not ("admin" in scopes or needed in scopes):
            raise AccessDenied(403, f"this API key may not use {path}: it needs the '{needed}' scope")
        return Caller(address=address, key_id=key_id, scopes=scopes,
                      customer=self.customer(headers.get(CUSTOMER_HEADER, "")))

    def open_to(self, *, peer: str, headers: dict[str, str]) -> bool:
        """/metrics and /api/docs: loopback, or any valid key."""
        if is_loopback(self.address(peer, headers.get("x-forwarded-for", ""))):
            return True
        return self.key(headers.get("authorization", "")) is not None



def _same(sent: str, expected: str) -> bool:
    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))
