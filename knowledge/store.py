"""Chroma access for the knowledge base: client, collection, and an embedding function that is our encoder.

Chroma's default embedding function downloads an ONNX model on first use, which fails offline, so
every create *and* get passes our own function. Records are added with precomputed embeddings (one
batched encoder pass), so Chroma never has to embed anything itself.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from core.encoders import Encoder
from core.errors import TandemError

VERSION_KEY = "tandem_version"
ENCODER_KEY = "tandem_encoder"  # which encoder version made the stored vectors


def _embedding_function_class():
    """Defined on first use so importing this module loads neither chromadb nor a model."""
    global _EF_CLASS
    if _EF_CLASS is not None:
        return _EF_CLASS
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    class TandemEmbeddingFunction(EmbeddingFunction[Documents]):
        """The knowledge base's own encoder. Records are always added with their vectors, so Chroma calls this
        only if someone queries the collection by text; passing it on create/get keeps Chroma from loading
        (and downloading) its default model."""

        def __init__(self, encoder: Encoder | None = None) -> None:
            self.encoder = encoder

        def __call__(self, input: Documents) -> Embeddings:
            if self.encoder is None:
                raise TandemError("this collection was opened without an encoder; open it through the knowledge base")
            return list(self.encoder.encode_passages(list(input)))

        @staticmethod
        def name() -> str:
            return "tandem-encoder"

        def get_config(self) -> dict[str, Any]:
            return {}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> TandemEmbeddingFunction:
            return TandemEmbeddingFunction()

        def default_space(self) -> str:  # type: ignore[override]
            return "cosine"

    try:
        register_embedding_function(TandemEmbeddingFunction)
    except ValueError:  # already registered by an earlier import in this process
        pass
    _EF_CLASS = TandemEmbeddingFunction
    return _EF_CLASS


_EF_CLASS = None


def embedding_function(encoder: Encoder | None = None):
    return _embedding_function_class()(encoder)


def open_client(path: Path | None = None, url: str = ""):
    """Embedded Chroma at ``path``, or a Chroma server when ``url`` is given (TANDEM_CHROMA_URL)."""
    import chromadb

    settings = chromadb.Settings(anonymized_telemetry=False)
    if url:
        from urllib.parse import urlparse

        parsed = urlparse(url if "://" in url else f"http://{url}")
        try:
            return chromadb.HttpClient(host=parsed.hostname or "localhost", port=parsed.port or 8000,
                                       ssl=parsed.scheme == "https", settings=settings)
        except Exception as exc:
            raise TandemError(f"cannot reach Chroma at {url} ({exc.__class__.__name__}). "
                              "Fix: start the Chroma server or unset TANDEM_CHROMA_URL") from None
    if path is None:
        raise ValueError("either a path or a url is needed")
    try:
        with _OPEN_LOCK:
            return _persistent_client(chromadb, path, settings)
    except OSError as exc:
        raise TandemError(f"cannot open the Chroma store at {path} ({exc.strerror}). "
                          "Fix: check TANDEM_HOME is writable") from None
    except Exception as exc:  # chromadb raises its own errors for a corrupt or foreign chroma.sqlite3
        reason = " ".join(str(exc).split())[:160] or exc.__class__.__name__
        raise TandemError(f"the Chroma store at {path} is damaged ({reason}). Fix: move it away "
                          f"(mv {path} {path}.broken) and rebuild it: `tandem init` for the demo knowledge base, "
                          "or `tandem kb ingest <your files>`") from None


# Chroma builds its per-path system without a lock: two threads opening the same store at once (a page and the
# inbox's background learning) left one client without its Rust bindings ("'RustBindingsAPI' object has no
# attribute 'bindings'"). Opening is rare and quick; one at a time.
_OPEN_LOCK = threading.Lock()


def _persistent_client(chromadb, path: Path, settings):
    if not (path / "chroma.sqlite3").exists():
        # Chroma caches one system per path; one cached for a folder since deleted would write into
        # a database without tables ("no such table: acquire_write"). Forget that path's entry only.
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(path), None)
        SharedSystemClient._identifier_to_refcount.pop(str(path), None)
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=settings)


def open_collection(client, name: str, encoder: Encoder | None = None):
    """Get or create the KB collection in cosine space, always with our embedding function."""
    if len(name) < 3:
        raise TandemError(f"collection name '{name}' is too short (Chroma needs 3+ characters). "
                          "Fix: set TANDEM_KB_COLLECTION")
    return client.get_or_create_collection(name=name, embedding_function=embedding_function(encoder),
                                           configuration={"hnsw": {"space": "cosine"}})


def _fresh_metadata(client, name: str) -> dict:
    """The collection's metadata as stored now (a Collection object keeps the copy it was opened with)."""
    try:
        collection = client.get_collection(name=name, embedding_function=embedding_function())
    except Exception:  # the collection does not exist (yet)
        return {}
    return dict(collection.metadata or {})


def stored_version(client, name: str) -> str | None:
    """The content hash last written by any process (cheap: no records are read)."""
    return _fresh_metadata(client, name).get(VERSION_KEY)


def write_version(client, collection, version: str, encoder_version: str) -> None:
    metadata = {**_fresh_metadata(client, collection.name), ENCODER_KEY: encoder_version}
    if version:
        metadata[VERSION_KEY] = version
    collection.modify(metadata=metadata)


def stored_encoder(client, name: str) -> str | None:
    return _fresh_metadata(client, name).get(ENCODER_KEY)


def read_all(collection) -> dict[str, list]:
    """Every record with documents, metadata and embeddings, in pages (Chroma caps one get)."""
    out: dict[str, list] = {"ids": [], "documents": [], "metadatas": [], "embeddings": []}
    page = 5000
    offset = 0
    while True:
        got = collection.get(include=["documents", "metadatas", "embeddings"], limit=page, offset=offset)
        ids = got["ids"]
        if not ids:
            break
        out["ids"].extend(ids)
        out["documents"].extend(got["documents"])
        out["metadatas"].extend(got["metadatas"])
        out["embeddings"].extend(got["embeddings"])
        if len(ids) < page:
            break
        offset += page
    return out


def batch_size(client) -> int:
    try:
        return max(1, min(5000, int(client.get_max_batch_size())))
    except Exception:
        return 1000
