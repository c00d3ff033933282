"""The Redis-backed shared state against a real redis-server: what one replica caches the other finds, and the
per-namespace id stream stays bounded however long the cache runs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from chains.state import CacheEntry


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    import redis

    from tandem.processes import Child, free_port

    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    child = Child("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", str(folder)], folder / "redis.log").start()
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 30
    while True:
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline and child.alive(), child.last_line()
            time.sleep(0.1)
    yield url
    child.stop()


def entry(namespace: str, key: str, ttl_s: float, seed: int) -> CacheEntry:
    vector = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    return CacheEntry(namespace=namespace, key=key, vector=vector / np.linalg.norm(vector), negations=frozenset(),
                      payload={"answer": key}, expires_at=time.time() + ttl_s, text=key)


def test_what_one_replica_caches_the_other_finds_semantically_until_it_expires(redis_url, encoder, settings):
    from chains.cache import ResponseCache
    from chains.redis_state import RedisState

    one, two = (ResponseCache(RedisState(redis_url, prefix="t1:"), ttl_s=1.0) for _ in range(2))  # two replicas
    asked, reworded = "How can I reset my password?", "how could I reset my password"
    payload = {"answer": "Use the reset link on the sign-in page."}
    assert one.store(asked, encoder.encode_query(asked), "ns", payload)
    hit = two.lookup(reworded, encoder.encode_query(reworded), "ns", settings.cache_similarity)
    assert hit is not None and hit.kind == "semantic" and hit.source_text == asked and hit.payload == payload
    assert hit.similarity >= settings.cache_similarity
    time.sleep(1.2)
    assert two.lookup(reworded, encoder.encode_query(reworded), "ns", settings.cache_similarity) is None
    assert two.lookup_exact(asked, "ns") is None  # Redis' own expiry


def test_the_id_stream_keeps_only_ids_of_entries_that_can_still_be_live(redis_url):
    import redis

    from chains.redis_state import RedisState

    state = RedisState(redis_url, prefix="t2:")
    for index in range(50):
        assert state.cache_put(entry("ns", f"question {index}", 0.3, index))
    raw = redis.Redis.from_url(redis_url)
    assert raw.xlen("t2:ids:ns") == 50
    time.sleep(0.8)  # past two lifetimes of the first 50
    assert state.cache_put(entry("ns", "a new question", 0.3, 99))
    assert raw.xlen("t2:ids:ns") == 1
    assert [e.key for e in RedisState(redis_url, prefix="t2:").cache_vectors("ns").entries] == ["a new question"]


def test_a_deleted_entry_is_gone_for_every_replica_by_key_and_for_the_deleting_one_by_vector(redis_url):
    from chains.redis_state import RedisState

    one, two = RedisState(redis_url, prefix="del:"), RedisState(redis_url, prefix="del:")
    kept, dropped = entry("ns", "kept", 60, 1), entry("ns", "dropped", 60, 2)
    assert one.cache_put(kept) and one.cache_put(dropped)
    assert len(one.cache_vectors("ns").entries) == 2  # the mirror has read both
    assert one.cache_delete("ns", "dropped") and not one.cache_delete("ns", "dropped")
    assert two.cache_get("ns", "dropped") is None and two.cache_get("ns", "kept") is not None
    assert [e.key for e in one.cache_vectors("ns").entries] == ["kept"]
