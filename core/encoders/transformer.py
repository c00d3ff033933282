"""MiniLM and its KB-tuned copies served by torch (transformers): mean pooling, normalised."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.encoders.base import Encoder, embedded_by_length, folder_version


class TransformerEncoder(Encoder):
    """A sentence-transformers style folder (MiniLM and its KB-tuned copies): mean pooling, normalised.

    Calls the transformer directly rather than through sentence-transformers' ``encode``: for one short
    query that skips most of the per-call overhead (the hot path embeds every message once).
    """

    max_length = 128

    def __init__(self, folder: Path, name: str, threads: int = 1):
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.set_num_threads(threads)
        self.threads = threads
        self._torch = torch
        self.folder = folder
        self.name = name
        self.version = folder_version(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModel.from_pretrained(str(folder)).eval()
        self.dim = int(self.model.config.hidden_size)
        self._lock = threading.Lock()

    def _embed_passages(self, texts: Sequence[str], batch_size: int, workers: int = 1) -> np.ndarray:
        # ``workers`` is not used: torch runs one forward pass at a time here and spreads it over its own threads
        return embedded_by_length(texts, batch_size, self.dim, self._embed_batch)

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        tokens = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with self._lock, self._torch.inference_mode():
            hidden = self.model(**tokens).last_hidden_state
        return mean_pooled(hidden, tokens["attention_mask"]).numpy()


def mean_pooled(hidden: Any, attention_mask: Any) -> Any:
    """Sentence vectors from a transformer's token states (torch tensors): the mean over real tokens, unit length.
    Serving and tuning (offline/encoder_tuning.py) share it, so a tuned model is served as it was trained."""
    import torch

    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)
