"""The passage vector cache (core.passage_cache) with the real MiniLM: stored texts are embedded once per encoder
version, customer messages never reach the file, and a broken file costs a warning, not an answer."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from core.passage_cache import PassageCache

PASSAGES = ["Standard shipping takes 3-5 business days.", "You can return unworn shoes within 30 days.",
            "Standard shipping takes 3-5 business days."]


@pytest.fixture
def cache_file(encoder, tmp_path, monkeypatch):
    """This test's own cache file, given to the session's encoder as the loader gives it the settings' path
    (core.encoders.cache.load_encoder); the encoder's own path comes back afterwards."""
    path = tmp_path / "passages.sqlite3"
    monkeypatch.setattr(encoder, "passage_cache_path", path)
    return path


def rows(path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM passages").fetchone()[0]


def test_a_passage_is_embedded_once_and_read_back_by_another_process_unchanged(encoder, cache_file):
    first = encoder.encode_passages(PASSAGES)
    assert rows(cache_file) == 2  # the repeated text is one row
    calls = []

    def embed(texts):
        calls.append(texts)
        return encoder._embed_passages(texts, 64)

    # A new cache object on the same file is what the next process sees.
    again = PassageCache(cache_file).vectors(encoder.passage_identity, PASSAGES + ["A text no one embedded yet."],
                                             encoder.dim, embed)
    assert calls == [["A text no one embedded yet."]]
    np.testing.assert_array_equal(again[:3], first)
    np.testing.assert_allclose(first[0], encoder._embed_passages(PASSAGES[:1], 64)[0], atol=1e-5)


def test_another_encoder_version_does_not_read_the_vectors_of_this_one(encoder, cache_file):
    encoder.encode_passages(PASSAGES[:1])
    calls = []
    PassageCache(cache_file).vectors(f"{encoder.name}|retuned000|{encoder.backend}|passage", PASSAGES[:1],
                                     encoder.dim, lambda texts: calls.append(texts) or np.ones((1, encoder.dim)))
    assert calls == [PASSAGES[:1]]


def test_customer_messages_are_never_written_to_the_cache(encoder, cache_file):
    encoder.encode_passages(PASSAGES[:1])
    encoder.encode_queries(["my order NW-104233 never came, write to me at ana@example.com"])
    encoder.encode_query("where is my parcel")
    assert rows(cache_file) == 1


def test_a_corrupt_cache_file_is_given_up_with_a_warning_and_passages_are_still_embedded(encoder, tmp_path, caplog):
    broken = tmp_path / "passages.sqlite3"
    broken.write_bytes(b"this is not a database" * 100)
    cache = PassageCache(broken)
    vectors = cache.vectors("minilm|x|torch|passage", PASSAGES, encoder.dim,
                            lambda texts: encoder._embed_passages(texts, 64))
    assert vectors.shape == (3, encoder.dim) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    assert "passage vector cache" in caplog.text and "TANDEM_PASSAGE_CACHE=off" in caplog.text
