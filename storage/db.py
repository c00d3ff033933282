"""The database: one :class:`Database` per URL, SQLite in WAL mode (so the app writes while the console reads)
or any SQLAlchemy URL (PostgreSQL in production).

Tables are created on :meth:`Database.init`, and columns added to a table in a later release are added to
an existing database there too (additive migration), so an older ``$TANDEM_HOME`` keeps working.

Process-wide: ``open_database`` keeps one :class:`Database` per URL, because an engine owns a connection pool that
is meant to be shared.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlmodel import Session, SQLModel, create_engine

from core.errors import TandemError
from core.settings import unwritable_reason
from storage import tables  # noqa: F401  (registers the tables on SQLModel.metadata)


class StorageError(TandemError):
    """The database cannot be used; the message is one actionable line."""


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def _make_engine(url: str) -> Engine:
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
        return engine
    try:
        return create_engine(url, pool_pre_ping=True)
    except (ImportError, ArgumentError, SQLAlchemyError) as exc:
        raise StorageError(f"cannot use TANDEM_DATABASE_URL ({exc.__class__.__name__}: {exc}).") from None


class Database:
    """An engine and its sessions. Cheap to share; every part that reads or writes rows is handed one."""

    def __init__(self, url: str):
        self.url = url
        self.engine = _make_engine(url)
        self._ready = False
        self._init_lock = threading.Lock()

    @property
    def display_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.url.get_backend_name() == "sqlite"

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def init(self) -> Database:
        """Create missing tables and columns, and check that the database answers."""
        with self._init_lock:
            try:
                SQLModel.metadata.create_all(self.engine)
                _add_missing_columns(self.engine)
                with self.engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
            except SQLAlchemyError as exc:
                reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
                raise StorageError(f"database {self.display_url} is not usable ({reason}). "
                                   "Fix: check TANDEM_DATABASE_URL and that the server runs") from None
            self._ready = True
        return self


def _add_missing_columns(engine: Engine) -> None:
    """ALTER TABLE ... ADD COLUMN for model columns an existing table lacks (new columns are nullable)."""
    inspector = inspect(engine)
    for table in SQLModel.metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            kind = column.type.compile(dialect=engine.dialect)
            raw = getattr(column.default, "arg", None)
            default = None if callable(raw) else raw
            clause = ""
            if isinstance(default, bool):
                clause = f" DEFAULT {'true' if default else 'false'}"
            elif isinstance(default, (int, float)):
                clause = f" DEFAULT {default}"
            elif isinstance(default, str):
                clause = " DEFAULT '" + default.replace("'", "''") + "'"
            with engine.begin() as conn:
                conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}{clause}'))


@functools.lru_cache(maxsize=8)
def open_database(url: str) -> Database:
    """The Database for ``url`` (the settings' ``db_url``: TANDEM_DATABASE_URL or SQLite under TANDEM_HOME), one
    per URL and process: an engine owns a connection pool, which is meant to be shared."""
    return Database(url)
