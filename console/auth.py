"""Console sign-in: constant-time password check and a brute-force throttle kept in the database.

Every sign-in attempt is a row in ``console_logins``. The throttle is global (not per browser or IP):
the console has one shared password, so a guesser changing address must not reset the counter.
Rule: after ``FREE_FAILURES`` failures since the last success (failures older than
``FAILURE_MEMORY_S`` are forgotten) sign-in is locked for ``BASE_LOCK_S`` seconds after the last
failure, doubling with each further failure up to ``MAX_LOCK_S``. Attempts while locked are refused
without checking the password and are not counted, so a lock always ends.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.settings import get_settings
from storage.db import Database
from storage.tables import ConsoleLogin, utcnow

FREE_FAILURES = 5
FAILURE_MEMORY_S = 300.0
BASE_LOCK_S = 30.0
MAX_LOCK_S = 900.0


@dataclass(frozen=True)
class SignIn:
    ok: bool
    message: str
    locked_for_s: float = 0.0


def password_matches(password: str) -> bool:
    expected = get_settings().console_password.encode()
    return hmac.compare_digest((password or "").encode(), expected)


def _failure_streak(session: Session, now: datetime) -> list[datetime]:
    """Failure times since the last success, oldest first, within the memory window (extended by locks)."""
    last_ok = session.exec(select(ConsoleLogin.created_at).where(ConsoleLogin.ok == True)  # noqa: E712
                           .order_by(col(ConsoleLogin.created_at).desc()).limit(1)).first()
    # The memory reaches back far enough that a growing lock is never forgotten while it lasts.
    horizon = now - timedelta(seconds=FAILURE_MEMORY_S + MAX_LOCK_S)
    since = max(horizon, last_ok) if last_ok else horizon
    rows = session.exec(select(ConsoleLogin.created_at).where(ConsoleLogin.ok == False)  # noqa: E712
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


def locked_for_s(db: Database, now: datetime | None = None) -> float:
    """Seconds until sign-in is allowed again (0 when not locked)."""
    now = now or utcnow()
    with db.session() as session:
        return _locked_for(_failure_streak(session, now), now)


def sign_in(db: Database, password: str, operator: str, now: datetime | None = None) -> SignIn:
    """Check the password unless locked; record the attempt; say what happened in one line."""
    now = now or utcnow()
    with db.session() as session:
        wait = _locked_for(_failure_streak(session, now), now)
        if wait > 0:
            return SignIn(False, f"Too many failed sign-ins. Try again in {int(wait) + 1} s.", wait)
        ok = password_matches(password)
        session.add(ConsoleLogin(created_at=now, operator=(operator or "")[:80], ok=ok))
        session.commit()
        if ok:
            return SignIn(True, "Signed in.")
        wait = _locked_for(_failure_streak(session, now), now)
    if wait > 0:
        return SignIn(False, f"Wrong password. Too many failed sign-ins: locked for {int(wait) + 1} s.", wait)
    return SignIn(False, "Wrong password.")
