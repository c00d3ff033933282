"""Encoders: text to L2-normalised vectors, behind one small interface, loaded once per process.

The knowledge base, the cache and the router all take an :class:`Encoder`; none of them knows which model
is behind it or how wide its vectors are (``encoder.dim``). Queries and passages are encoded separately
because some models (e5) prefix them differently; for MiniLM both are the same call.

An encoder is identified by ``name`` (what it is) and ``version`` (which weights): cached vectors, tuned
thresholds and router calibrations are only valid for the version they were made with.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import TandemError
from core.models import MINILM_FIX, ModelError, model_path
from core.settings import get_settings

# Written next to the weights of every encoder folder Tandem makes (tuned, exported): what it is and from what.
STAMP_FILE = "tandem-encoder.json"


class Encoder(ABC):
    """What every part that embeds text needs: width, identity, and the two encode calls."""

    name: str
    version: str
    dim: int

    @abstractmethod
    def encode_passages(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Stored texts (answers, example questions) as a float32 matrix, one L2-normalised row each."""

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Customer messages as a float32 matrix. Same as passages unless the model wants a prefix."""
        return self.encode_passages(texts, batch_size)

    def encode_query(self, text: str) -> np.ndarray:
        """One message, memoised: cache, router and retrieval share this single embedding."""
        return self._memo(text)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "dim": self.dim}

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


class TransformerEncoder(Encoder):
    """A sentence-transformers style folder (MiniLM and its KB-tuned copies): mean pooling, normalised.

    Calls the transformer directly rather than through sentence-transformers' ``encode``: for one short
    query that skips most of the per-call overhead (the hot path embeds every message once).
    """

    max_length = 128

    def __init__(self, folder: Path, name: str):
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.set_num_threads(get_settings().torch_threads)
        self._torch = torch
        self.folder = folder
        self.name = name
        self.version = folder_version(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModel.from_pretrained(str(folder)).eval()
        self.dim = int(self.model.config.hidden_size)
        self._lock = threading.Lock()

    def encode_passages(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        items = list(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        torch = self._torch
        for start in range(0, len(items), batch_size):
            batch = [t if t.strip() else "." for t in items[start:start + batch_size]]
            tokens = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length,
                                    return_tensors="pt")
            with self._lock, torch.inference_mode():
                hidden = self.model(**tokens).last_hidden_state
            mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            out[start:start + len(batch)] = pooled.numpy()
        return out


# name -> loader; a loader takes nothing and returns a ready encoder (models load on first use, once).
def _minilm() -> Encoder:
    return TransformerEncoder(model_path("minilm"), "minilm")


ENCODERS: dict[str, Callable[[], Encoder]] = {"minilm": _minilm}
_LOADED: dict[str, Encoder] = {}
_LOAD_LOCK = threading.Lock()


def load_encoder(name: str | None = None) -> Encoder:
    """The registered encoder ``name`` (default: TANDEM_ENCODER), loaded once per process.

    Loaded weights are immutable, so sharing one instance per process is a cache, not shared state.
    """
    name = name or get_settings().encoder
    if name not in ENCODERS:
        raise ModelError(f"unknown encoder '{name}'. Known: {', '.join(sorted(ENCODERS))}. Fix: set TANDEM_ENCODER")
    with _LOAD_LOCK:
        if name not in _LOADED:
            try:
                _LOADED[name] = ENCODERS[name]()
            except TandemError:
                raise
            except Exception as exc:  # a corrupt folder surfaces as one line, not a traceback
                raise ModelError(f"encoder '{name}' failed to load ({exc.__class__.__name__}: {exc}). "
                                 f"Fix: {MINILM_FIX} --force-reinstall") from exc
        return _LOADED[name]
