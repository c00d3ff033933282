"""The interface every encoder implements (:class:`Encoder`) and what the encoders share: the folder stamp and its
version, and batching texts by length.

An encoder is identified by ``name`` (what it is) and ``version`` (which weights): cached vectors, tuned
thresholds and router calibrations are only valid for the version they were made with.
"""

from __future__ import annotations

import functools
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.passage_cache import passage_cache

# Written next to the weights of every encoder folder Tandem makes (tuned, exported): what it is and from what.
STAMP_FILE = "tandem-encoder.json"


class Encoder(ABC):
    """What every part that embeds text needs: width, identity, and the two encode calls."""

    name: str
    version: str
    dim: int
    problem: str = ""  # why this is not the encoder that was asked for (a missing tuned folder), else ""
    # Where stored texts' vectors are kept between runs (core.passage_cache); None: embedded every time. The loader
    # sets it from the caller's settings (core.encoders.cache.load_encoder).
    passage_cache_path: Path | None = None

    @abstractmethod
    def _embed_passages(self, texts: Sequence[str], batch_size: int, workers: int = 1) -> np.ndarray:
        """Run the model on stored texts: a float32 matrix, one L2-normalised row each. ``workers`` > 1 lets an
        encoder run that many batches at once (a bulk ingest on a machine of its own); one that cannot ignores it."""

    def encode_passages(self, texts: Sequence[str], batch_size: int = 64, workers: int = 1) -> np.ndarray:
        """Stored texts (answers, example questions) as a float32 matrix, one L2-normalised row each; each text is
        embedded once per encoder version and machine (:mod:`core.passage_cache`)."""
        path = self.passage_cache_path
        if path is None:
            return self._embed_passages(texts, batch_size, workers)
        return passage_cache(path).vectors(self.passage_identity, texts, self.dim,
                                           lambda missing: self._embed_passages(missing, batch_size, workers))

    @property
    def passage_identity(self) -> str:
        """What a stored text's vector depends on besides the text: the passage cache's key."""
        return f"{self.name}|{self.version}|{self.backend}|passage"

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Customer messages as a float32 matrix. Same model call as passages unless the model wants a prefix,
        but never through the passage cache: messages are not written to disk."""
        return self._embed_passages(texts, batch_size)

    def encode_answer(self, text: str) -> np.ndarray:
        """A generated answer, embedded as a passage but never through the passage cache (it may hold what the
        customer wrote): how the answer check measures whether it is about the message."""
        return self._embed_passages([text], 1)[0]

    def encode_query(self, text: str) -> np.ndarray:
        """One message, memoised: cache, router and retrieval share this single embedding."""
        return self._memo(text)

    backend: str = "torch"
    threads: int = 1  # what the backend was given per forward pass

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "dim": self.dim, "backend": self.backend,
                "problem": self.problem}

    @functools.cached_property
    def _memo(self) -> Callable[[str], np.ndarray]:
        @functools.lru_cache(maxsize=4096)
        def one(text: str) -> np.ndarray:
            vector = self.encode_queries([text])[0]
            vector.setflags(write=False)
            return vector

        return one


def folder_version(folder: Path) -> str:
    """A short content id of an encoder folder: its stamp when Tandem wrote one, else the weights' size and name."""
    stamp = folder / STAMP_FILE
    if stamp.is_file():
        try:
            return str(json.loads(stamp.read_text())["version"])
        except (ValueError, KeyError):
            pass
    weights = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    digest = hashlib.sha256("|".join(f"{w.name}:{w.stat().st_size}" for w in weights).encode()).hexdigest()
    return digest[:10]


def embedded_by_length(texts: Sequence[str], batch_size: int, dim: int,
                       embed_batch: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``texts`` embedded by ``embed_batch`` in batches of similar length, each row back in its text's place (a
    blank text as "."). A batch is padded to its longest text, so a KB's short questions batched with its long
    answers would cost as much as answers: sorted, the demo KB's 565 records embed in 4.5 s instead of 6.5 s on
    one core (same vectors to 2e-7)."""
    items = [t if t.strip() else "." for t in texts]
    out = np.zeros((len(items), dim), dtype=np.float32)
    order = np.argsort([len(t) for t in items], kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        out[rows] = embed_batch([items[i] for i in rows])
    return out
