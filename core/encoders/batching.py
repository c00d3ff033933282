"""Micro-batching in front of an encoder: messages that arrive together share one forward pass."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.encoders.base import Encoder


class BatchingEncoder(Encoder):
    """Embeds messages that arrive together in one forward pass (micro-batching), with no timer.

    A message that finds the encoder idle is embedded at once, so a lone message never waits (no bound to choose:
    the measured overhead for a lone message is below 0.1 ms). Messages that arrive while a pass runs queue up and
    go together in the next pass (up to ``max_batch``, of similar length): the wait is bounded by one forward pass,
    and under load one pass serves many requests instead of one each. Used for the torch backend only: ONNX
    Runtime runs concurrent calls in parallel itself, and serialising them into batches measured slower.
    """

    def __init__(self, inner: Encoder, max_batch: int = 16):
        self.inner, self.max_batch = inner, max_batch
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.backend, self.problem, self.threads = inner.backend, inner.problem, inner.threads
        self._cv = threading.Condition()
        self._queue: list[_Pending] = []
        self._busy = False
        self.passes = 0  # forward passes run, and messages they served (for the bench and the profile)
        self.messages = 0

    def _embed_passages(self, texts: Sequence[str], batch_size: int, workers: int = 1) -> np.ndarray:
        return self.inner._embed_passages(texts, batch_size, workers)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if len(texts) != 1:
            return self.inner.encode_queries(texts, batch_size)
        mine = _Pending(texts[0])
        with self._cv:
            self._queue.append(mine)
        while True:  # wait for a pass that serves this message, or lead one (possibly for others first)
            with self._cv:
                while mine.vector is None and self._busy:
                    self._cv.wait()
                if mine.vector is not None:
                    return mine.vector[None, :]
                self._busy = True
                batch = self._take_batch()
            try:
                vectors = self.inner.encode_queries([p.text for p in batch])
            except BaseException:
                with self._cv:
                    self._busy = False
                    # the others go back for another leader to retry; this message fails with the exception
                    self._queue = [p for p in batch + self._queue if p is not mine]
                    self._cv.notify_all()
                raise
            with self._cv:
                for pending, vector in zip(batch, vectors):
                    pending.vector = vector
                self.passes += 1
                self.messages += len(batch)
                self._busy = False
                self._cv.notify_all()

    def _take_batch(self) -> list[_Pending]:
        """The oldest waiting message and those of a similar length (within 2x): a batch is padded to its longest
        message, so one long message would slow every short one in its pass (measured in `make bench`)."""
        anchor = max(1, len(self._queue[0].text))
        batch = [p for p in self._queue if 0.5 <= max(1, len(p.text)) / anchor <= 2.0][:self.max_batch]
        taken = {id(p) for p in batch}
        self._queue = [p for p in self._queue if id(p) not in taken]
        return batch

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "micro_batching": True}


class _Pending:
    __slots__ = ("text", "vector")

    def __init__(self, text: str):
        self.text = text
        self.vector: np.ndarray | None = None
