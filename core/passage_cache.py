"""Passage vectors kept on disk: what one encoder version made of one stored text, embedded once per machine.

Every process that opens a knowledge base embeds passages it has embedded before: Tandem's 446 starter
out-of-scope examples in every vector space (about 9 s of e5 on 2 cores, at every start of the app, the console
and each CLI command), and the whole KB again after `tandem kb tune --reset`. Data directories that point
TANDEM_PASSAGE_CACHE at one file (a test session's, a host's replicas) also share a new directory's demo KB.
A passage's vector depends only on the encoder's identity (name, weights version, backend) and the text, so the
vectors are kept in one SQLite file keyed by a hash of both, as LangChain's ``CacheBackedEmbeddings`` does.

Only passages are kept. Customer messages are queries and never reach this file (see
:meth:`core.encoders.Encoder.encode_queries`). A cache that cannot be opened or written (a read-only or full
disk, a corrupt file) is given up with one warning: passages are then embedded as if it did not exist.

Process-wide: ``passage_cache(path)`` keeps one object per file, because its SQLite connection and lock must be
shared by every encoder of the process.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

_LOOKUP_CHUNK = 500  # keys per SELECT ... IN (...): under SQLite's bound-parameter limit


class PassageCache:
    """One SQLite file of float32 vectors keyed by sha256(encoder identity, text); safe across threads and
    processes (WAL and a busy timeout; two processes that embed the same text write the same row)."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._given_up = False

    def vectors(self, identity: str, texts: Sequence[str], dim: int,
                embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """``texts`` as a float32 matrix: the kept rows read, the others made by ``embed`` (once per distinct
        text) and kept."""
        if self._given_up or not texts:
            return embed(list(texts))
        keys = [hashlib.sha256(f"{identity}\0{text}".encode()).digest() for text in texts]
        try:
            found = self._read(keys, dim)
        except (sqlite3.Error, OSError) as exc:
            self._give_up(exc)
            return embed(list(texts))
        missing = list(dict.fromkeys(key for key in keys if key not in found))
        if missing:
            text_of = dict(zip(keys, texts))
            made = np.asarray(embed([text_of[key] for key in missing]), dtype=np.float32)
            found.update(zip(missing, made))
            try:
                self._write(list(zip(missing, made)))
            except (sqlite3.Error, OSError) as exc:
                self._give_up(exc)
        return np.stack([found[key] for key in keys])

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=10, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS passages (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
            self._conn = conn
        return self._conn

    def _read(self, keys: list[bytes], dim: int) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            conn = self._connection()
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[start:start + _LOOKUP_CHUNK]
                rows = conn.execute(f"SELECT key, vector FROM passages WHERE key IN ({','.join('?' * len(chunk))})",
                                    chunk).fetchall()
                for key, blob in rows:
                    if len(blob) == 4 * dim:  # another width under the same key would be a broken row: embed again
                        found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _write(self, rows: list[tuple[bytes, np.ndarray]]) -> None:
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                conn.executemany("INSERT OR REPLACE INTO passages (key, vector) VALUES (?, ?)",
                                 [(key, np.ascontiguousarray(vector, dtype=np.float32).tobytes())
                                  for key, vector in rows])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _give_up(self, exc: Exception) -> None:
        log.warning("passage vector cache %s is not usable (%s: %s); embedding without it. Fix: delete the file or "
                    "set TANDEM_PASSAGE_CACHE=off", self.path, exc.__class__.__name__, exc)
        self._given_up = True


@functools.cache
def passage_cache(path: Path) -> PassageCache:
    """The process's one cache object for ``path`` (its connection and lock are shared by every encoder)."""
    return PassageCache(path)
