"""The same transformer exported to ONNX and run by onnxruntime: fp32 or int8 (offline/encoder_export.py exports it
and its accuracy gate chooses)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from core.cpu import cpu_flags
from core.encoders.base import Encoder
from core.encoders.transformer import TransformerEncoder

ONNX_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"  # dynamic quantization: int8 weights and activations
BACKEND_FILES = {"onnx": ONNX_FILE, "onnx-int8": INT8_FILE}
EXPORT_FILE = "export.json"  # what offline/encoder_export.py measured and chose


def cpu_has_vnni() -> bool:
    return bool(cpu_flags() & {"avx512_vnni", "avx_vnni"})


class OnnxEncoder(Encoder):
    """The same transformer exported to ONNX and run by onnxruntime (pooling and normalisation as above).

    It keeps the version of the folder it was exported from: fp32 gives the same vectors, and int8 is used only
    when its accuracy gate passed, so the stored vectors stay comparable.
    """

    max_length = TransformerEncoder.max_length

    def __init__(self, folder: Path, name: str, file: str, version: str, threads: int = 1):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.threads = threads
        self._session = ort.InferenceSession(str(folder / file), options, providers=["CPUExecutionProvider"])
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.name, self.version, self.backend = name, version, {f: b for b, f in BACKEND_FILES.items()}.get(file, "onnx")
        self.dim = int(self._session.get_outputs()[0].shape[-1] or 384)
        # What the graph takes: MiniLM (BERT) also takes token_type_ids; a graph without that input fails if fed it.
        self._inputs = [i.name for i in self._session.get_inputs()]

    def _embed_passages(self, texts: Sequence[str], batch_size: int, workers: int = 1) -> np.ndarray:
        """Batches of texts of similar length in tokens (a batch is padded to its longest; sorting by tokens
        rather than characters pads the catalog's texts 11% less), ``workers`` batches at once. The vectors are
        the same as one batch at a time (a text's vector does not depend on its batch's padding here: equal to the
        bit on the catalog's texts). The tokenizer runs in this thread only: a fast tokenizer shared by threads
        fails ("Already borrowed"); onnxruntime's run is safe to call from several and releases the GIL."""
        items = [t if t.strip() else "." for t in texts]
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if len(items) <= batch_size:  # one batch (a message): nothing to sort, no second tokenizer pass
            if items:
                out[:] = self._run(self._tokens(items))
            return out
        lengths = [len(ids) for ids in self.tokenizer(items, truncation=True, max_length=self.max_length)["input_ids"]]
        order = np.argsort(lengths, kind="stable")
        chunks = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
        batches = (self._tokens([items[i] for i in rows]) for rows in chunks)
        if workers <= 1 or len(chunks) == 1:
            for rows, tokens in zip(chunks, batches):
                out[rows] = self._run(tokens)
            return out
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for rows, vectors in zip(chunks, pool.map(self._run, batches)):
                out[rows] = vectors
        return out

    def _tokens(self, batch: list[str]) -> dict[str, np.ndarray]:
        tokens = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        return {name: np.asarray(value) for name, value in tokens.items()}

    def _run(self, tokens: dict[str, np.ndarray]) -> np.ndarray:
        feed = {name: tokens[name].astype(np.int64) for name in self._inputs}
        hidden = self._session.run(None, feed)[0]
        mask = tokens["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
