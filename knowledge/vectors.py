"""The knowledge base's vectors in Chroma: records embedded into the primary space and every language's space, a
language space's missing vectors made when it is read, and a whole collection re-embedded by another encoder."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from core.encoders import Encoder
from knowledge import store
from knowledge.records import Records


def upsert(client: Any, collection: Any, encoder: Encoder, language_encoders: dict[str, Encoder],
           space_collections: dict[str, Any], records: Records, progress: bool) -> None:
    """Write ``records`` with their vectors in every space."""
    from tqdm import tqdm

    ids = list(records)
    if store.stored_encoder(client, collection.name) is None:
        # a new collection: the vectors about to be written are ours
        store.write_version(client, collection, "", encoder.version)
    step = min(256, store.batch_size(client))
    bar = tqdm(total=len(ids), desc="Embedding", unit="rec", disable=not progress or len(ids) < 200, leave=False)
    try:
        for start in range(0, len(ids), step):
            chunk = ids[start:start + step]
            docs = [records[i][0] for i in chunk]
            vectors, space_vectors = _in_every_space(encoder, language_encoders, docs)
            collection.upsert(ids=chunk, documents=docs, metadatas=[records[i][1] for i in chunk],
                              embeddings=vectors)
            for lang, space in space_collections.items():  # changed texts: new vectors there too
                space.upsert(ids=chunk, documents=docs, embeddings=space_vectors[lang])
            bar.update(len(chunk))
    finally:
        bar.close()


def _in_every_space(encoder: Encoder, language_encoders: dict[str, Encoder],
                    docs: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``docs`` in the primary space and in every language's space, the encoders running side by side: torch
    and the e5 engine both release the GIL, so a bilingual ingest takes about as long as its slower encoder
    rather than the sum (the demo KB's 565 records: 16.9 s one after the other, 10.3 s side by side)."""
    if not language_encoders:
        return encoder.encode_passages(docs), {}
    with ThreadPoolExecutor(max_workers=len(language_encoders)) as pool:
        pending = {lang: pool.submit(other.encode_passages, docs) for lang, other in language_encoders.items()}
        vectors = encoder.encode_passages(docs)
        return vectors, {lang: future.result() for lang, future in pending.items()}


def space_vectors(client: Any, encoder: Encoder, collection: Any, ids: list[str], texts: list[str]) -> np.ndarray:
    """The records' vectors in one language's space: read from its collection, the missing ones made now."""
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(ids), 5000):
        got = collection.get(ids=ids[start:start + 5000], include=["embeddings"])
        found.update(zip(got["ids"], (np.asarray(e, dtype=np.float32) for e in got["embeddings"])))
    missing = [i for i, rid in enumerate(ids) if rid not in found]
    step = min(256, store.batch_size(client))
    for start in range(0, len(missing), step):
        chunk = missing[start:start + step]
        vectors = encoder.encode_passages([texts[i] for i in chunk])
        collection.upsert(ids=[ids[i] for i in chunk], embeddings=vectors, documents=[texts[i] for i in chunk])
        found.update(zip((ids[i] for i in chunk), vectors))
    if not ids:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return np.stack([found[rid] for rid in ids])


def reembed(client: Any, collection: Any, encoder: Encoder, got: dict[str, list]) -> None:
    """Every record of ``got`` (the whole collection, as read) embedded again by ``encoder``."""
    from tqdm import tqdm

    ids, docs, metas = got["ids"], [d or "" for d in got["documents"]], got["metadatas"]
    step = min(256, store.batch_size(client))
    bar = tqdm(total=len(ids), desc=f"Re-embedding the KB with {encoder.name} {encoder.version}",
               unit="rec", disable=True if len(ids) < 200 else None, leave=False)  # None: only on a terminal
    try:
        for start in range(0, len(ids), step):
            chunk = slice(start, start + step)
            collection.upsert(ids=ids[chunk], documents=docs[chunk], metadatas=metas[chunk],
                              embeddings=encoder.encode_passages(docs[chunk]))
            bar.update(len(ids[chunk]))
    finally:
        bar.close()
    store.write_version(client, collection, "", encoder.version)
