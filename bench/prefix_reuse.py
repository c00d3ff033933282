"""Conversation prefix reuse: multi-turn conversations replayed against real vLLM servers, prefix caching on and off.

Conversations (``--conversations``, the size knob; ``make bench`` replays Sizes.prefix_conversations): 3-6 turns
each, built from the hand-written sets offline/answer_eval.py scores (the demo shop's messages, dev and held-out, and
the English Bitext held-out set), one set per conversation, messages drawn at random with a fixed seed. Each turn's
prompt is the app's own (chains.answers.llm_messages) with the history the service keeps: the earlier user
messages as the LLM got them (``sent``), each answer in full. Each turn's help-center context is the message's right
answer and two other answers of its knowledge base (three others for an out-of-scope message), not a retrieval; the
assistant's turn is the right answer's text (what the small tier serves). Every request asks for one token, so
time to first token is the prompt's prefill, which the cache shortens.

Requests go one at a time, so the difference of vLLM's counters (vllm:prefix_cache_hits_total and
vllm:prefix_cache_queries_total) read before and after a request is that request's. Three passes:
``before`` (the layout before issue 42: the last 4 messages, cut at 500 characters, without their context) and
``served`` on a server with prefix caching on, and ``served`` on a second server started with
--no-enable-prefix-caching, each conversation on both in turn (time to first token side by side). ``before`` runs
first, so its prompts find nothing of ``served`` in the cache; ``served`` shares no prompt of ``before`` beyond the
first turn (whose hit rate is therefore not reported as the conversation's).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bench.common import pct, standalone

SEED = 42
TURNS = (3, 6)  # turns per conversation, inclusive


@dataclass(frozen=True)
class Turn:
    text: str
    hits: list[Any]
    answer: str  # the assistant's reply the next turn's history holds


def conversations(n: int, seed: int = SEED) -> list[list[Turn]]:
    """``n`` conversations of 3-6 turns, alternating between the demo shop's messages and Bitext's held-out set."""
    from knowledge.base import Hit
    from offline.answer_eval import EVAL_SETS, read_messages, references

    pools = []
    for kb, names in (("demo", ("demo", "demo-dev")), ("bitext", ("heldout",))):
        refs = references(kb)
        messages = [m for name in names for m in read_messages(EVAL_SETS[name])]
        pools.append((refs, messages))
    rng = random.Random(seed)
    out = []
    for i in range(n):
        refs, messages = pools[i % len(pools)]
        ids = sorted(refs)
        turns = []
        for message in rng.sample(messages, rng.randint(*TURNS)):
            right = [message.expected] if message.expected in refs else []
            others = [a for a in rng.sample(ids, 4) if a not in right][:3 - len(right)]
            hits = [Hit(answer_id=a, answer=refs[a], title=a.replace("_", " "), score=0.8 - 0.1 * k, matched_text=refs[a],
                        source="bench") for k, a in enumerate(right + others)]
            answer = refs[right[0]] if right else refs[others[0]]
            turns.append(Turn(" ".join(message.text.split()), hits, answer))
        out.append(turns)
    return out


def before_layout(query: str, hits: Sequence[Any], history: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """The prompt before issue 42 (chains/answers.py at bc25ea2), for the hit rate it had."""
    from chains.answers import SYSTEM_PROMPT, llm_task

    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    messages += [{"role": t["role"], "content": t["content"][:500]} for t in history[-4:]]
    return messages + [{"role": "user", "content": llm_task(query, hits)}]


def served_layout(query: str, hits: Sequence[Any], history: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    from chains.answers import llm_messages

    return llm_messages(query, hits, history)


LAYOUTS: dict[str, Callable[..., list[dict[str, str]]]] = {"before": before_layout, "served": served_layout}


def counters(client: httpx.Client, base_url: str) -> tuple[float, float]:
    from chains.llm.load import metrics_url_for
    from chains.llm.metrics_parser import parse_vllm_metrics

    metrics = parse_vllm_metrics(client.get(metrics_url_for(base_url), timeout=30).text)
    return metrics.prefix_cache_hits or 0.0, metrics.prefix_cache_queries or 0.0


def first_token(client: httpx.Client, base_url: str, model: str, messages: list[dict[str, str]]) -> tuple[float, int]:
    """Time to the first token in ms, and the prompt's tokens (the usage chunk)."""
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    ttft = None
    prompt_tokens = 0
    with client.stream("POST", base_url.rstrip("/") + "/chat/completions", json=body, timeout=120) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            choices = chunk.get("choices") or []
            if ttft is None and choices and (choices[0].get("delta") or {}).get("content") is not None:
                ttft = (time.perf_counter() - started) * 1000
            prompt_tokens = int((chunk.get("usage") or {}).get("prompt_tokens") or prompt_tokens)
    return (ttft if ttft is not None else (time.perf_counter() - started) * 1000), prompt_tokens


def replay(client: httpx.Client, base_url: str, model: str, conv: list[Turn], layout: str) -> list[dict[str, float]]:
    """One conversation, one request at a time: per turn its number, TTFT, prompt tokens and the counter deltas."""
    build = LAYOUTS[layout]
    rows = []
    history: list[dict[str, str]] = []
    for number, turn in enumerate(conv, start=1):
        messages = build(turn.text, turn.hits, history)
        hits0, queries0 = counters(client, base_url)
        ttft, prompt_tokens = first_token(client, base_url, model, messages)
        hits1, queries1 = counters(client, base_url)
        rows.append({"turn": number, "ttft_ms": ttft, "prompt_tokens": prompt_tokens, "hits": hits1 - hits0,
                     "queries": queries1 - queries0})
        history += [{"role": "user", "content": turn.text, "sent": messages[-1]["content"]},
                    {"role": "assistant", "content": turn.answer}]
    return rows


def summarize(rows: list[dict[str, float]]) -> dict[str, Any]:
    later = [r for r in rows if r["turn"] >= 2]
    first = [r for r in rows if r["turn"] == 1]
    queries = sum(r["queries"] for r in later)
    return {"turns": len(rows), "later_turns": len(later),
            "hit_rate_turn2plus": round(sum(r["hits"] for r in later) / queries, 3) if queries else None,
            "prompt_tokens_turn2plus_mean": round(sum(r["prompt_tokens"] for r in later) / len(later), 1)
            if later else None,
            "prompt_tokens_turn2plus_max": max((r["prompt_tokens"] for r in later), default=None),
            "ttft_ms_turn1": pct([r["ttft_ms"] for r in first], 50, 95),
            "ttft_ms_turn2plus": pct([r["ttft_ms"] for r in later], 50, 95),
            "hit_rate_by_turn": {str(t): round(sum(r["hits"] for r in rows if r["turn"] == t)
                                               / max(1.0, sum(r["queries"] for r in rows if r["turn"] == t)), 3)
                                 for t in range(1, TURNS[1] + 1) if any(r["turn"] == t for r in rows)}}


def server_args(settings, caching: bool) -> str:
    args = [a for a in settings.vllm_args.split() if a not in ("--enable-prefix-caching", "--no-enable-prefix-caching")]
    return " ".join(args + ["--enable-prefix-caching" if caching else "--no-enable-prefix-caching"])


def run(settings, n: int, log: Callable[[str], None], before: int | None = None, logs_dir=None,
        budget_s: float | None = None, servers: dict[bool, Any] | None = None) -> dict[str, Any]:
    """Two servers, started one after the other on free ports (stopped on the way out): prefix caching on and off.
    The ``before`` pass runs first on the one with caching on; then each conversation is replayed on one and at once
    on the other, so a busy spell of the machine weighs on both sides alike. Past ``budget_s`` of replay no further
    conversation starts; ``conversations_replayed`` says how many were.

    ``servers`` ({True: caching on, False: off}, started by bench.mixed_trace.start_servers, so with the endpoint
    that resets the cache) are used instead and left running: `make bench` starts one pair for its three cache
    sections. The cache of the one with caching on is emptied first, so nothing of earlier work is found in it."""
    from tandem.llm_server import LLMServer
    from tandem.processes import free_port

    if servers is not None:
        reset = httpx.post(servers[True].url.removesuffix("/v1") + "/reset_prefix_cache", timeout=60)
        reset.raise_for_status()
        return _replay(n, log, before, budget_s, servers)
    started: dict[bool, Any] = {}
    try:
        for caching in (True, False):
            port = free_port()
            server_settings = settings.model_copy(update={"vllm_args": server_args(settings, caching),
                                                           "llm_url": f"http://127.0.0.1:{port}/v1"})
            log_path = logs_dir / f"vllm-prefix-{'on' if caching else 'off'}.log" if logs_dir else None
            started[caching] = LLMServer(server_settings, port=port, log_path=log_path)
            began = time.perf_counter()
            started[caching].start(timeout=600)
            log(f"  prefix reuse: vLLM with prefix caching {'on' if caching else 'off'} ready after "
                f"{time.perf_counter() - began:.0f} s ({started[caching].model})")
        return _replay(n, log, before, budget_s, started)
    finally:
        for server in started.values():
            server.stop()


def _replay(n: int, log: Callable[[str], None], before: int | None, budget_s: float | None,
            servers: dict[bool, Any]) -> dict[str, Any]:
    """The three passes on ``servers`` (caching on, off), which are up."""
    convs = conversations(n)
    before_convs = convs[:n if before is None else min(before, n)]
    result: dict[str, Any] = {"conversations": n, "turns": sum(len(c) for c in convs),
                              "before_conversations": len(before_convs), "max_tokens": 1,
                              "sets": "demo shop (dev + held-out) and Bitext held-out, alternating"}
    on, off = servers[True], servers[False]
    result["model"] = on.model
    rows: dict[str, list[dict[str, float]]] = {"before_caching_on": [], "served_caching_on": [],
                                               "served_caching_off": []}
    began = time.perf_counter()
    with httpx.Client() as client:
        for conv in before_convs:
            rows["before_caching_on"] += replay(client, on.url, on.model, conv, "before")
        result["conversations_replayed"] = 0
        for i, conv in enumerate(convs, start=1):
            if budget_s is not None and time.perf_counter() - began > budget_s:
                log(f"  prefix reuse: budget of {budget_s:.0f} s spent after {i - 1} conversations")
                break
            result["conversations_replayed"] = i
            rows["served_caching_on"] += replay(client, on.url, on.model, conv, "served")
            rows["served_caching_off"] += replay(client, off.url, off.model, conv, "served")
            if i % 25 == 0:
                log(f"  prefix reuse: {i}/{len(convs)} conversations ({time.perf_counter() - began:.0f} s)")
    result["replay_s"] = round(time.perf_counter() - began, 1)
    for key, got in rows.items():
        result[key] = summarize(got)
        log(f"  prefix reuse {key}: {result[key]}")
    on_ttft = (result.get("served_caching_on") or {}).get("ttft_ms_turn2plus", {}).get("p50")
    off_ttft = (result.get("served_caching_off") or {}).get("ttft_ms_turn2plus", {}).get("p50")
    if on_ttft and off_ttft:
        result["ttft_turn2plus_p50_off_over_on"] = round(off_ttft / on_ttft, 2)
    return result


def table(reuse: dict[str, Any]) -> list[str]:
    """Markdown lines: turns 2 and later, per pass (the README's bench section and "Conversation prefix reuse")."""
    lines = [f"Conversation prefix reuse: {reuse.get('conversations_replayed', reuse.get('conversations'))} "
             f"conversations ({reuse.get('sets')}), 3-6 turns, one request at a time, `{reuse.get('model')}`, "
             "max_tokens 1 (time to first token = prefill); hit rate = vLLM's prefix_cache_hits / queries, in "
             "prompt tokens:", "",
             "| pass | turns 2+ | prompt tokens, mean (max) | prefix-cache hit rate | TTFT p50 ms | TTFT p95 ms |",
             "|---|---|---|---|---|---|"]
    labels = (("before_caching_on", "layout before issue 42, caching on"), ("served_caching_on", "served layout, "
              "caching on"), ("served_caching_off", "served layout, --no-enable-prefix-caching"))
    for key, label in labels:
        row = reuse.get(key) or {}
        if not row:
            continue
        rate = row.get("hit_rate_turn2plus")
        lines.append(f"| {label} | {row.get('later_turns')} | {row.get('prompt_tokens_turn2plus_mean')} "
                     f"({row.get('prompt_tokens_turn2plus_max')}) | {'–' if rate is None else f'{rate:.1%}'} | "
                     f"{(row.get('ttft_ms_turn2plus') or {}).get('p50')} | {(row.get('ttft_ms_turn2plus') or {}).get('p95')} |")
    if reuse.get("ttft_turn2plus_p50_off_over_on"):
        lines += ["", f"Time to first token of turns 2+, p50, caching off / on: "
                  f"**{reuse['ttft_turn2plus_p50_off_over_on']}x**."]
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m bench.prefix_reuse", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200, help="conversations replayed (3-6 turns each)")
    parser.add_argument("--before", type=int, default=None,
                        help="conversations of the 'before' pass (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    parser.add_argument("--budget-s", type=float, default=None, help="start no conversation after this many seconds")
    args = parser.parse_args(argv)
    from core.settings import get_settings

    return standalone(lambda log: run(get_settings(), args.conversations, log, args.before, budget_s=args.budget_s),
                      table, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
