"""Engine and sessions. SQLite runs in WAL mode so the app writes while the console reads."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlmodel import Session, SQLModel, create_engine

from storage import tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from tandem.errors import TandemError
from tandem.settings import get_settings, unwritable_reason


class StorageError(TandemError):
    """The database cannot be used; the message is one actionable line."""


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


@functools.lru_cache(maxsize=8)
def get_engine(url: str | None = None) -> Engine:
    url = url or get_settings().db_url
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StorageError(f"TANDEM_DATABASE_URL '{url}' is not a database URL. Fix: use e.g. "
                           "sqlite:///path/tandem.db or postgresql+psycopg2://user:pass@host/db") from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:":
            folder = Path(database).expanduser().resolve().parent
            if reason := unwritable_reason(folder):
                raise StorageError(f"cannot write the database folder {folder} ({reason}). Fix: set "
                                   "TANDEM_HOME (or TANDEM_DATABASE_URL) to a writable place")
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        try:
            engine = create_engine(url, pool_pre_ping=True)
        except (ImportError, ArgumentError, SQLAlchemyError) as exc:
            raise StorageError(f"cannot use TANDEM_DATABASE_URL ({exc.__class__.__name__}: {exc}).") from None
    return engine


def init_db(url: str | None = None) -> Engine:
    """Create the tables if needed and check the database answers."""
    engine = get_engine(url)
    try:
        SQLModel.metadata.create_all(engine)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        reason = str(exc.orig if getattr(exc, "orig", None) else exc).splitlines()[0]
        raise StorageError(f"database {engine.url.render_as_string(hide_password=True)} is not usable "
                           f"({reason}). Fix: check TANDEM_DATABASE_URL and that the server runs") from None
    return engine


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    with Session(get_engine(url), expire_on_commit=False) as session:
        yield session


def reset_engines() -> None:
    """Forget cached engines (tests point TANDEM_DATABASE_URL somewhere new)."""
    get_engine.cache_clear()
