"""LLM levels: the real vLLM server the bench started, driven straight over its OpenAI API at 1, 8 and 32
concurrent streaming clients, each for a fixed time.

Each client sends LLM-bound chat completions (the app's own prompt for ~40 customer questions the router sends to
the LLM: system prompt, help-center context, message) with ``max_tokens = settings.llm_max_tokens``, streaming, with
``stream_options.include_usage`` so the final chunk carries the token counts. Per level: requests, p50/p95 total
latency, p50 time to first token, aggregate completion tokens per second, errors. The server's memory (RSS of the
process and its children) is sampled while the levels run.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable

import httpx

from bench.common import closed_loop, pct

TRANSFORMERS_NOTE = ("Earlier runs reported `transformers serve` LLM figures; they are in this README's git history "
                     "and are not comparable with the vLLM levels.")


def _clean(text: str) -> str:
    return " ".join(text.split())


def questions(pool: list[str], n: int) -> list[str]:
    """`n` distinct LLM-bound customer questions: the bench's LLM pool first, topped up from tau-bench test."""
    out = list(dict.fromkeys(_clean(t) for t in pool if _clean(t)))[:n]
    if len(out) < n:
        from offline import datasets as ds

        for query in ds.tau_bench(("test",)):
            text = _clean(query.text)
            if text and text not in out:
                out.append(text)
            if len(out) >= n:
                break
    return out


def build_prompts(group, pool: list[str], sizes, log: Callable[[str], None]) -> list[list[dict]]:
    """The chat messages the app would send for each question (routed through the Bitext group's chain, so the
    help-center context is the real one); without a chain, the system prompt and the message alone."""
    from chains.answers import llm_messages
    from chains.schema import ChatRequest
    from chains.turn import Turn
    from offline.route_batch import live_thresholds

    texts = questions(pool, sizes.llm_questions)
    chain = getattr(group, "chain", None)
    if chain is None:
        prompts = [llm_messages(text, [], []) for text in texts]
    else:
        thresholds = live_thresholds()
        prompts = [chain.llm_request(chain.route_only.invoke(Turn(request=ChatRequest(message=text, channel="batch"),
                                                                  thresholds=thresholds)))
                   for text in texts]
    log(f"  LLM levels: {len(prompts)} prompts ({'with KB context' if chain is not None else 'no KB context'})")
    return prompts


def tree_memory_mib(pid: int | None, pss: bool = False) -> dict[str, float | None]:
    """RSS of a process and all its children, in MiB; with ``pss`` also PSS (shared pages split, not counted
    once per process; slower: it reads every mapping)."""
    import psutil

    out: dict[str, float | None] = {"rss_mib": None, "pss_mib": None}
    if pid is None:
        return out
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return out
    rss = shared = 0.0
    for proc in members:
        try:
            rss += proc.memory_info().rss
            if pss:
                shared += getattr(proc.memory_full_info(), "pss", 0.0)
        except (psutil.Error, AttributeError):
            continue
    out["rss_mib"] = round(rss / 2**20, 1)
    if pss and shared:
        out["pss_mib"] = round(shared / 2**20, 1)
    return out


class MemorySampler:
    """Samples a process tree's RSS every `every` seconds in a thread and keeps the peak."""

    def __init__(self, pid: int | None, every: float = 0.5):
        self.pid, self.every = pid, every
        self.peak_rss_mib: float | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self) -> None:
        now = tree_memory_mib(self.pid)["rss_mib"]
        if now is not None and (self.peak_rss_mib is None or now > self.peak_rss_mib):
            self.peak_rss_mib = now
        self.samples += 1

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def engine(base_url: str, headers: dict[str, str]) -> dict:
    """The served model name (GET /v1/models) and the engine's version (GET /version, vLLM's, when it answers)."""
    root = base_url[:-3] if base_url.rstrip("/").endswith("/v1") else base_url
    root = root.rstrip("/")
    out: dict = {"model": None, "version": None, "engine": "vLLM"}
    with httpx.Client(timeout=10.0, headers=headers) as client:
        models = client.get(base_url.rstrip("/") + "/models")
        models.raise_for_status()
        data = models.json().get("data") or []
        out["model"] = data[0]["id"] if data else None
        try:
            reply = client.get(root + "/version")
            if reply.status_code == 200:
                out["version"] = reply.json().get("version")
        except (httpx.HTTPError, ValueError):
            pass
    if out["version"]:
        out["engine"] = f"vLLM {out['version']}"
    return out


def stream_one(client: httpx.Client, url: str, model: str, messages: list[dict], max_tokens: int) -> dict:
    """One streamed chat completion: total latency, time to first token, completion tokens (from usage)."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    first: float | None = None
    usage: dict = {}
    chunks = 0
    try:
        with client.stream("POST", url + "/chat/completions", json=body) as reply:
            if reply.status_code != 200:
                reply.read()
                return {"ok": False, "error": f"HTTP {reply.status_code}: {reply.text[:160]}",
                        "latency_ms": (time.perf_counter() - started) * 1000}
            for line in reply.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                for choice in chunk.get("choices") or []:
                    if (choice.get("delta") or {}).get("content"):
                        chunks += 1
                        if first is None:
                            first = time.perf_counter()
                if chunk.get("usage"):
                    usage = chunk["usage"]
    except (httpx.HTTPError, ValueError) as exc:
        return {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"[:200],
                "latency_ms": (time.perf_counter() - started) * 1000}
    done = time.perf_counter()
    return {"ok": True, "latency_ms": (done - started) * 1000,
            "ttft_ms": (first - started) * 1000 if first is not None else None,
            "completion_tokens": int(usage.get("completion_tokens") or chunks),
            "prompt_tokens": usage.get("prompt_tokens"), "usage_reported": bool(usage)}


def level(url: str, model: str, prompts: list[list[dict]], clients: int, seconds: float, max_tokens: int,
          headers: dict[str, str]) -> dict:
    """`clients` threads streaming back to back; a request started before the deadline is allowed to finish, and
    the level's elapsed time (for tokens/s) runs until the last one has."""
    counter = itertools.count()
    rows, elapsed = closed_loop(
        clients, seconds, lambda: next(counter),
        lambda client, index: stream_one(client, url, model, prompts[index % len(prompts)], max_tokens),
        {"timeout": httpx.Timeout(180.0, connect=10.0), "headers": headers}, join_grace_s=200.0)
    ok = [r for r in rows if r["ok"]]
    tokens = sum(r["completion_tokens"] for r in ok)
    latency = pct((r["latency_ms"] for r in ok), 50, 95)
    return {"clients": clients, "requests": len(rows), "seconds": round(elapsed, 2),
            "p50_ms": latency["p50"], "p95_ms": latency["p95"],
            "ttft_p50_ms": pct((r["ttft_ms"] for r in ok), 50)["p50"],
            "completion_tokens": tokens, "tokens_per_s": round(tokens / elapsed, 1) if elapsed else None,
            "requests_per_s": round(len(ok) / elapsed, 2) if elapsed else None,
            "mean_prompt_tokens": round(sum(r["prompt_tokens"] or 0 for r in ok) / len(ok), 1) if ok else None,
            "usage_reported": sum(r["usage_reported"] for r in ok),
            "errors": len(rows) - len(ok),
            "error_examples": sorted({r["error"] for r in rows if not r["ok"]})[:3]}


def run_levels(server, prompts: list[list[dict]], sizes, max_tokens: int, log: Callable[[str], None]) -> dict:
    from core.settings import get_settings

    if not prompts:
        raise RuntimeError("no LLM prompts to send")
    headers = {"Authorization": f"Bearer {get_settings().llm_api_key}"}
    info = engine(server.url, headers)
    model = info["model"] or server.model
    pid = server.child.pid if getattr(server, "child", None) is not None else None
    log(f"  {info['engine']} serving {model}; {len(prompts)} prompts, max_tokens {max_tokens}, "
        f"{sizes.llm_level_seconds:.0f} s per level")
    levels = []
    with MemorySampler(pid) as memory:
        for clients in sizes.llm_levels:
            row = level(server.url, model, prompts, clients, sizes.llm_level_seconds, max_tokens, headers)
            row.update(tree_memory_mib(pid, pss=True))
            levels.append(row)
            log(f"  LLM x{clients:<3} {row['requests']:4} requests  p50 {row['p50_ms']} ms  p95 {row['p95_ms']} ms  "
                f"TTFT p50 {row['ttft_p50_ms']} ms  {row['tokens_per_s']} tok/s  errors {row['errors']}  "
                f"rss {row['rss_mib']} MiB")
        memory.sample()
    return {**info, "model": model, "max_tokens": max_tokens, "prompts": len(prompts),
            "level_seconds": sizes.llm_level_seconds, "levels": levels,
            "timing": "requests start until the level's time is up and are then allowed to finish; a level's "
                      "seconds (and tokens/s) include that drain",
            "memory": {"peak_rss_mib": memory.peak_rss_mib,
                       "peak_pss_mib": max((r["pss_mib"] for r in levels if r["pss_mib"] is not None), default=None),
                       "samples": memory.samples, "pid": pid,
                       "how": "psutil RSS of the vLLM server process and all its children, summed and sampled every "
                              "0.5 s (shared pages count once per process; PSS, after each level, splits them)"},
            "note": TRANSFORMERS_NOTE}


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.llm_levels --url URL`: the LLM part of the bench against any running OpenAI-compatible
    server (scripts/gpu_check.sh runs it against `vllm serve` on a GPU). Prints one JSON object."""
    import argparse
    from types import SimpleNamespace

    from chains.answers import llm_messages

    parser = argparse.ArgumentParser(prog="python -m bench.llm_levels",
                                     description="the LLM part of the bench against a running OpenAI-compatible server")
    parser.add_argument("--url", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--levels", default="1,8,32", help="concurrent clients per level")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per level")
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args(argv)
    server = SimpleNamespace(url=args.url.rstrip("/"), model="", child=None)
    prompts = [llm_messages(text, [], []) for text in questions([], 40)]
    sizes = SimpleNamespace(llm_levels=[int(n) for n in args.levels.split(",")], llm_level_seconds=args.seconds)
    report = run_levels(server, prompts, sizes, args.max_tokens, log=lambda line: print(line, flush=True))
    print(json.dumps(report))
    return 0 if all(level["errors"] == 0 for level in report["levels"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())


def restart_llm(server, log: Callable[[str], None]) -> None:
    log("  the LLM server is not running (stopped from outside?); starting it again")
    server.start(wait=True, timeout=240)


def wait_and_warm(server) -> bool:
    """The bench's first LLM section: the server answers, and one request has paid the first-call costs."""
    server.wait_ready(timeout=300)
    server.warm_up()
    return True
