"""Console sign-in: operator accounts (bcrypt, console/accounts.py) or, while none exists, the shared password;
a brute-force throttle per operator name and per client address kept in the database; the start-up exposure check.

Every sign-in attempt is a row in ``console_logins`` (name as typed, client address, ok). The throttle counts the
failures of each name and of each address separately, and an attempt is refused while either is locked: a guesser
locks the names they try and their own address, never every operator (a name another operator signs in with is
locked only if the guesser tries that very name). Rule, per name and per address: after ``FREE_FAILURES`` failures
since its last success (failures older than ``FAILURE_MEMORY_S`` are forgotten) it is locked for ``BASE_LOCK_S``
seconds after the last failure, doubling with each further failure up to ``MAX_LOCK_S``. Attempts while locked are
refused without checking the password and are not counted, so a lock always ends.

Behind a reverse proxy every client has the proxy's address, so the address throttle then acts for all clients of
that proxy together; the per-name throttle is unaffected.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from console import accounts
from core.exposure import console_exposure_problem
from core.settings import get_settings
from storage.db import Database
from storage.tables import ConsoleLogin, utcnow

FREE_FAILURES = 5
FAILURE_MEMORY_S = 300.0
BASE_LOCK_S = 30.0
MAX_LOCK_S = 900.0
SHARED_NAME = "operator"  # the one name the shared password signs in, while there are no accounts
LOCAL_ADDRESS = "local"  # the client address when Streamlit reports none (localhost, AppTest)
KEY_CHARS = 80

# Check, verify and record run under one process-wide lock. Without it, N attempts started together would each read
# "fewer than FREE_FAILURES failures", each check a password and each record a failure: N guesses where the rule
# allows FREE_FAILURES. The console is one Streamlit process (one thread per browser session), so a threading.Lock
# makes check-and-record atomic. It serializes sign-ins (one bcrypt check, about 0.25 s, at a time), which a console
# of a few operators never notices; refusals while locked skip the check and are quick.
_SIGN_IN_LOCK = threading.Lock()


@dataclass(frozen=True)
class SignIn:
    ok: bool
    message: str
    locked_for_s: float = 0.0
    operator: str = ""  # the verified account name (the audit author) when ok
    via: str = ""  # "account" or "shared" when ok


def _key(value: str | None) -> str:
    return (value or "").strip()[:KEY_CHARS]


def shared_password_matches(password: str) -> bool:
    """The shared console password; an empty password (typed or configured) never matches."""
    expected = get_settings().console_password
    if not password or not expected:
        return False
    return hmac.compare_digest(password.encode(), expected.encode())


def _failure_streak(session: Session, column: Any, value: str, now: datetime) -> list[datetime]:
    """Failure times of one name or one address since its last success, oldest first, within the memory window
    (extended by locks)."""
    last_ok = session.exec(select(ConsoleLogin.created_at).where(column == value)
                           .where(ConsoleLogin.ok == True)  # noqa: E712
                           .order_by(col(ConsoleLogin.created_at).desc()).limit(1)).first()
    # The memory reaches back far enough that a growing lock is never forgotten while it lasts.
    horizon = now - timedelta(seconds=FAILURE_MEMORY_S + MAX_LOCK_S)
    since = max(horizon, last_ok) if last_ok else horizon
    rows = session.exec(select(ConsoleLogin.created_at).where(column == value)
                        .where(ConsoleLogin.ok == False)  # noqa: E712
                        .where(ConsoleLogin.created_at > since).order_by(col(ConsoleLogin.created_at))).all()
    return list(rows)


def lock_seconds_for(failures: int) -> float:
    if failures < FREE_FAILURES:
        return 0.0
    return min(MAX_LOCK_S, BASE_LOCK_S * 2 ** (failures - FREE_FAILURES))


def _locked_for(streak: list[datetime], now: datetime) -> float:
    # Only a burst of FREE_FAILURES within FAILURE_MEMORY_S arms the lock; slow typos never do.
    armed = any((streak[i + FREE_FAILURES - 1] - streak[i]).total_seconds() <= FAILURE_MEMORY_S
                for i in range(len(streak) - FREE_FAILURES + 1))
    if not armed:
        return 0.0
    until = streak[-1] + timedelta(seconds=lock_seconds_for(len(streak)))
    return max(0.0, (until - now).total_seconds())


def _wait(session: Session, name: str, address: str, now: datetime) -> float:
    return max(_locked_for(_failure_streak(session, ConsoleLogin.operator, name, now), now),
               _locked_for(_failure_streak(session, ConsoleLogin.address, address, now), now))


def locked_for_s(db: Database, name: str = SHARED_NAME, address: str = LOCAL_ADDRESS,
                 now: datetime | None = None) -> float:
    """Seconds until ``name`` may sign in from ``address`` again (0 when neither is locked)."""
    now = now or utcnow()
    with db.session() as session:
        return _wait(session, _key(name), _key(address) or LOCAL_ADDRESS, now)


def _verify(db: Database, name: str, password: str) -> str:
    """How the name and password are right ("account" or "shared"), or "" when they are not."""
    if accounts.has_accounts(db):
        return "account" if accounts.verify(db, name, password) else ""
    return "shared" if name == SHARED_NAME and shared_password_matches(password) else ""


def sign_in(db: Database, name: str, password: str, address: str | None = None,
            now: datetime | None = None) -> SignIn:
    """Check the name and password unless the name or the address is locked; record the attempt; say what
    happened in one line."""
    name, address = _key(name), _key(address) or LOCAL_ADDRESS
    wrong = "Wrong name or password." if accounts.has_accounts(db) or name != SHARED_NAME else "Wrong password."
    with _SIGN_IN_LOCK:
        now = now or utcnow()
        # Separate short sessions: a SQLite read transaction held across the bcrypt check could not become a write
        # once another process (the app logging requests) had written meanwhile. The lock keeps the three atomic.
        with db.session() as session:
            wait = _wait(session, name, address, now)
        if wait > 0:
            return SignIn(False, f"Too many failed sign-ins. Try again in {int(wait) + 1} s.", wait)
        via = _verify(db, name, password)
        with db.session() as session:
            session.add(ConsoleLogin(created_at=now, operator=name, address=address, ok=bool(via)))
            session.commit()
            if via:
                return SignIn(True, "Signed in.", operator=name, via=via)
            wait = _wait(session, name, address, now)
    if wait > 0:
        return SignIn(False, f"{wrong} Too many failed sign-ins: locked for {int(wait) + 1} s.", wait)
    return SignIn(False, wrong)


def still_signed_in(db: Database, name: str, via: str) -> bool:
    """Whether a console session signed in as ``name`` may go on: its account is still enabled, or (shared) there
    are still no accounts."""
    if via == "account":
        return accounts.is_active(db, name)
    return via == "shared" and name == SHARED_NAME and not accounts.has_accounts(db)


def exposure_problem(db: Database, host: str) -> str:
    """Why the console must not start listening on ``host`` ("" when it may): beyond loopback it needs operator
    accounts or a shared password other than the default."""
    return console_exposure_problem(host, get_settings().console_password, accounts.has_accounts(db))
