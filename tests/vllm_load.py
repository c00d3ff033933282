"""Real load on the real vLLM server: concurrent long generations sent straight to it (as other replicas would),
and its own /metrics read back. Used by the load-gate, degrade and cancellation tests."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

# Answered greedily, SmolLM2 writes this story up to the token cap (all 400 tokens, measured); a sampled reply can
# end in a few words, or be cut by the answer check, before a test gets to press Stop.
LONG_STORY = "Write a very long, detailed story about a parcel that travels around the world, chapter by chapter."
LONG_PROMPT = [{"role": "user", "content": LONG_STORY}]


def engine_metrics(base_url: str) -> dict[str, float]:
    """vLLM's own running and waiting request counts and the tokens it has generated so far, from its /metrics."""
    text = httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=5).text
    out = {}
    for name, metric in (("running", "num_requests_running"), ("waiting", "num_requests_waiting"),
                         ("generated_tokens", "generation_tokens_total")):
        found = re.findall(rf"^vllm:{metric}\{{[^}}]*\}} ([0-9.e+-]+)", text, re.M)
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


@dataclass
class Saturation:
    """The long generations :func:`saturated` keeps in flight, how each one that ended did, and what vLLM's
    /metrics said while :meth:`queued` waited."""

    base_url: str
    threads: list[threading.Thread] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)  # "HTTP 200 after 12 lines", "ConnectError: ..."
    readings: list[tuple[float, float, float]] = field(default_factory=list)  # (seconds in, running, waiting)
    started_at: float = field(default_factory=time.monotonic)

    def queued(self, at_least: int = 3, timeout: float = 180) -> dict[str, float]:
        """Wait until vLLM's own waiting queue holds ``at_least`` requests; fail saying what the engine reported over
        the wait and how the load's requests ended (on a starved 2-core machine the queue can take a minute to show)."""
        def enough() -> dict[str, float] | None:
            counts = engine_metrics(self.base_url)
            self.readings.append((round(time.monotonic() - self.started_at, 1), counts["running"], counts["waiting"]))
            return counts if counts["waiting"] >= at_least else None

        if counts := wait_for(enough, timeout):
            return counts
        most = (max(r[1] for r in self.readings), max(r[2] for r in self.readings)) if self.readings else None
        raise AssertionError(
            f"vLLM never queued {at_least} requests in {timeout:.0f} s: {len(self.readings)} /metrics readings, "
            f"at most (running, waiting) = {most}; first and last (s, running, waiting): "
            f"{self.readings[:3]} ... {self.readings[-3:]}; {len(self.ended)} load requests had ended "
            f"({len(self.threads)} kept in flight): {summarize(self.ended)}")


def summarize(outcomes: list[str]) -> str:
    return ", ".join(f"{n} x {outcome}" for outcome, n in Counter(outcomes).items()) or "none"


@contextmanager
def saturated(base_url: str, model: str, requests: int = 12, max_tokens: int = 400) -> Iterator[Saturation]:
    """``requests`` long generations in flight at once until the block ends: one that finishes on its own is
    replaced at once (a fast engine can finish a first batch before anyone looks at its queue). When the block
    ends, each is aborted at its next streamed line and none is replaced."""
    stop = threading.Event()
    load = Saturation(base_url)

    def one(client: httpx.Client) -> bool:
        """One generation, streamed until it ends or the block does; True if it ran normally."""
        lines, outcome = 0, ""
        try:
            with client.stream("POST", f"{base_url}/chat/completions",
                               json={"model": model, "messages": LONG_PROMPT, "max_tokens": max_tokens,
                                     "stream": True, "temperature": 1.0, "ignore_eos": True}) as response:
                outcome = f"HTTP {response.status_code}"
                for _ in response.iter_lines():
                    lines += 1
                    if stop.is_set():
                        break  # closing the stream aborts the request in the engine
            outcome += f" after {lines} lines" + (" (aborted)" if stop.is_set() else "")
        except httpx.HTTPError as error:
            outcome = f"{type(error).__name__}: {error}"
        load.ended.append(outcome)
        return outcome.startswith("HTTP 200")

    def keep_one_in_flight() -> None:
        with httpx.Client(timeout=300) as client:
            while not stop.is_set() and one(client):
                pass  # a refused or broken request is not retried: the failure message shows it

    load.threads = [threading.Thread(target=keep_one_in_flight, daemon=True) for _ in range(requests)]
    for thread in load.threads:
        thread.start()
    try:
        yield load
    finally:
        stop.set()
        for thread in load.threads:
            thread.join(30)
