"""Real load on the real vLLM server: concurrent long generations sent straight to it (as other replicas would),
and its own /metrics read back. Used by the load-gate, degrade and cancellation tests."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

LONG_PROMPT = [{"role": "user", "content": "Write a very long, detailed story about a parcel that travels around "
                                           "the world, chapter by chapter."}]


def engine_metrics(base_url: str) -> dict[str, float]:
    """vLLM's own running and waiting request counts, from its /metrics."""
    text = httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=5).text
    out = {}
    for name in ("running", "waiting"):
        found = re.findall(rf"^vllm:num_requests_{name}\{{[^}}]*\}} ([0-9.e+-]+)", text, re.M)
        out[name] = sum(float(v) for v in found)
    return out


def engine_idle(base_url: str) -> bool:
    """Nothing running or waiting in the engine (no generation left over from an earlier test)."""
    counts = engine_metrics(base_url)
    return counts["running"] == 0 and counts["waiting"] == 0


def wait_for(predicate, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


@contextmanager
def saturated(base_url: str, model: str, requests: int = 12, max_tokens: int = 400) -> Iterator[list[threading.Thread]]:
    """``requests`` long generations in flight at once until the block ends (then they are aborted)."""
    stop = threading.Event()

    def one() -> None:
        try:
            with httpx.Client(timeout=300) as client, client.stream(
                    "POST", f"{base_url}/chat/completions",
                    json={"model": model, "messages": LONG_PROMPT, "max_tokens": max_tokens, "stream": True,
                          "temperature": 1.0, "ignore_eos": True}) as response:
                for _ in response.iter_lines():
                    if stop.is_set():
                        break  # closing the stream aborts the request in the engine
        except httpx.HTTPError:
            pass

    threads = [threading.Thread(target=one, daemon=True) for _ in range(requests)]
    for thread in threads:
        thread.start()
    try:
        yield threads
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
