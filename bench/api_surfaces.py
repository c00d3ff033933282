"""Section 2c: what the OpenAI-compatible layer and the answer check cost, against the running app and vLLM.

- OpenAI layer: the same cached messages through `POST /api/v1/chat` and `POST /v1/chat/completions`, alternating,
  sequential; the difference of the two p50 round trips is the layer's overhead on a cache hit.
- Streaming: LLM-bound messages through `/v1/chat/completions` (model `tandem-llm`, stream); the time to the first
  chunk with text, next to the engine's own time to first token for that very request (the change of vLLM's
  `vllm:time_to_first_token_seconds` sum across it; requests are sequential, so the change is this request's).
- Answer check: `AnswerCheck.finish` in this process on answers of about 100 tokens against their context.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import httpx

from bench.common import pct

OPENAI = "/v1/chat/completions"
CHAT = "/api/v1/chat"
TTFT_SUM = "vllm:time_to_first_token_seconds_sum"


def openai_overhead(app_url: str, cached: list[str], rounds: int) -> dict:
    """Alternate both endpoints on messages the cache already holds; only pairs where both were cache hits count."""
    native: list[float] = []
    openai: list[float] = []
    with httpx.Client(timeout=60.0) as client:
        for index in range(rounds):
            message = cached[index % len(cached)]
            started = time.perf_counter()
            reply = client.post(app_url + CHAT, json={"message": message})
            native_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            completion = client.post(app_url + OPENAI, json={"model": "tandem",
                                                             "messages": [{"role": "user", "content": message}]})
            openai_ms = (time.perf_counter() - started) * 1000
            if reply.status_code == completion.status_code == 200 and reply.json().get("route") == "cache" \
                    and completion.headers.get("x-tandem-route") == "cache":
                native.append(native_ms)
                openai.append(openai_ms)
    p_native, p_openai = pct(native, 50)["p50"], pct(openai, 50)["p50"]
    return {"pairs": len(native), "api_v1_chat_p50_ms": p_native, "openai_p50_ms": p_openai,
            "overhead_p50_ms": round(p_openai - p_native, 2) if p_openai is not None and p_native is not None else None}


def _engine_ttft_sum(llm_base: str, client: httpx.Client) -> float | None:
    """vLLM's running sum of time-to-first-token seconds (from /metrics at the server root)."""
    text = client.get(llm_base.removesuffix("/v1") + "/metrics").text
    values = [float(m.group(1)) for m in re.finditer(rf"^{re.escape(TTFT_SUM)}{{[^}}]*}} ([0-9.e+-]+)$", text, re.M)]
    return sum(values) if values else None


def streaming_first_text(app_url: str, llm_base: str, messages: list[str], budget_s: float,
                         log: Callable[[str], None]) -> dict:
    """Sequential streamed LLM answers: first text chunk at the client against the engine's own TTFT."""
    rows: list[dict] = []
    deadline = time.perf_counter() + budget_s
    with httpx.Client(timeout=180.0) as client:
        for message in messages:
            if rows and time.perf_counter() > deadline:
                break
            before = _engine_ttft_sum(llm_base, client)
            started = time.perf_counter()
            first_text: float | None = None
            body = {"model": "tandem-llm", "stream": True, "messages": [{"role": "user", "content": message}]}
            with client.stream("POST", app_url + OPENAI, json=body) as reply:
                for line in reply.iter_lines():
                    if first_text is None and line.startswith("data: {"):
                        delta = json.loads(line[6:])["choices"][0].get("delta") or {}
                        if delta.get("content"):
                            first_text = (time.perf_counter() - started) * 1000
            after = _engine_ttft_sum(llm_base, client)
            if first_text is None or before is None or after is None or after <= before:
                continue  # no text, or the engine was not asked (a fallback): nothing to compare
            engine_ms = (after - before) * 1000
            rows.append({"first_text_ms": first_text, "engine_ttft_ms": engine_ms, "gap_ms": first_text - engine_ms})
    log(f"  streaming: {len(rows)} LLM answers compared")
    return {"requests": len(rows), "first_text_p50_ms": pct((r["first_text_ms"] for r in rows), 50)["p50"],
            "engine_ttft_p50_ms": pct((r["engine_ttft_ms"] for r in rows), 50)["p50"],
            "gap_p50_ms": pct((r["gap_ms"] for r in rows), 50)["p50"]}


def check_latency(contexts: list[str], repeats: int = 5) -> dict:
    """`AnswerCheck.finish` on ~100-token answers (each a help-center answer stretched to ~75 words, about 100
    tokens) against a context of three answers, as the chain passes it."""
    from chains.check import AnswerCheck

    answers = []
    for index, context in enumerate(contexts):
        words = context.split()
        while len(words) < 75:
            words += context.split()
        answers.append((" ".join(words[:75]), [context, contexts[(index + 1) % len(contexts)],
                                                contexts[(index + 2) % len(contexts)]]))
    timings: list[float] = []
    for _ in range(repeats):
        for answer, sources in answers:
            started = time.perf_counter()
            AnswerCheck(sources, "can you help me with this?").finish(answer)
            timings.append((time.perf_counter() - started) * 1000)
    return {"answers": len(timings), "p50_ms": pct(timings, 50)["p50"], "p95_ms": pct(timings, 95)["p95"]}


def run(app_url: str, llm_base: str, cached: list[str], llm_messages: list[str], contexts: list[str],
        budget_s: float, log: Callable[[str], None]) -> dict:
    log("  OpenAI layer on cache hits; streamed first text vs vLLM's TTFT; the answer check's own time")
    return {"openai_cache_hit": openai_overhead(app_url, cached, 60),
            "streaming": streaming_first_text(app_url, llm_base, llm_messages, budget_s, log),
            "answer_check": check_latency(contexts)}


def demo_answers() -> list[str]:
    """The demo shop's English answers: the contexts of the check's timing."""
    import csv
    from pathlib import Path

    with (Path(__file__).resolve().parents[1] / "knowledge" / "demo" / "answers.csv").open(encoding="utf-8") as f:
        return [row["answer"] for row in csv.DictReader(f)]
