"""Latency of an OpenAI-compatible chat endpoint, streaming: time to first token and total time of an answer, at
1 client and at N concurrent clients. Re-runnable against any endpoint (vLLM here, on CPU or GPU; any other server
that speaks /v1/chat/completions with ``stream``).

    # against a running server (asks it which model it serves)
    .venv/bin/python scripts/llm_latency.py --url http://127.0.0.1:8001/v1
    # start a local stand-in the way `tandem llm-server` does, time its start, measure, stop it
    .venv/bin/python scripts/llm_latency.py --start qwen2.5-0.5b --port 8011 --min-tokens 60 --show

``--min-tokens`` (a vLLM extension) makes every answer exactly ``--max-tokens`` long, so runs compare like with
like; leave it out for endpoints that reject unknown fields. Prints one JSON report (also to ``--json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
SYSTEM = ("You are the customer-service assistant of Northwind Goods, an online shop. Answer in the customer's language, "
          "in at most three short sentences, politely and concretely. Use only the facts in the help-center context; if "
          "it does not contain the answer, say so and offer a human colleague. Never invent order details, prices or "
          "policies.")
DRAFT = ("You can change items, sizes or the delivery address under Account > Orders > Edit order as long as the order "
         "status is still \"processing\". Orders placed before 14:00 CET on a business day usually ship the same day, "
         "so please act quickly. Once an order has shipped it can no longer be edited, but you can return anything "
         "you don't want within 30 days.")
PROMPTS = {
    # the shape of the app's rewrite: the help-center answer in a system turn, the customer's words as the user turn
    "rewrite": [
        {"role": "system", "content": SYSTEM},
        {"role": "system", "content": f"The help center answers this question as follows:\n{DRAFT}\n\nReply to the "
         "customer's next message with this answer, adapted to what they asked. Keep every link, amount, duration, "
         "menu path and option name exactly as written, add no other facts, and speak to the customer directly. "
         "Reply in English, in at most three sentences."},
        {"role": "user", "content": "hi, I ordered the wrong size of a t-shirt an hour ago, can I still fix that?"},
    ],
    "chinese": [
        {"role": "system", "content": SYSTEM},
        {"role": "system", "content": "Help-center entries that may be relevant:\n[1] 订单可以修改吗？: 只要订单状态仍为"
         "“处理中”，您就可以在“我的账户 > 订单 > 编辑订单”中修改商品、尺码或收货地址。订单一旦发货就无法再修改，但不想要的商品"
         "可以在30天内退货。\n\nReply to the customer's next message using only these entries. If they do not answer "
         "it, say so in one sentence and offer to pass the question to a human colleague. Reply in Simplified Chinese "
         "(简体中文), in at most three sentences."},
        {"role": "user", "content": "我刚下的订单尺码选错了，还能改吗？"},
    ],
}


async def one_call(client: httpx.AsyncClient, url: str, model: str, messages: list[dict], args,
                   min_tokens: int = 0) -> dict:
    body: dict = {"model": model, "messages": messages, "max_tokens": args.max_tokens, "stream": True,
                  "stream_options": {"include_usage": True}}
    if args.temperature is not None:
        body["temperature"] = args.temperature
    if min_tokens:
        body["min_tokens"] = min_tokens
    start = time.perf_counter()
    first = None
    text: list[str] = []
    tokens = None
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                delta = (choice.get("delta") or {}).get("content")
                if delta:
                    if first is None:
                        first = time.perf_counter() - start
                    text.append(delta)
            if chunk.get("usage"):
                tokens = chunk["usage"].get("completion_tokens")
    total = time.perf_counter() - start
    return {"ttft_s": first, "total_s": total, "tokens": tokens, "text": "".join(text)}


def summary(calls: list[dict], wall: float, rounds: int) -> dict:
    """Per request: first token and total (p50, max); per round: wall time; all clients together: tokens/s."""
    ttft = [c["ttft_s"] for c in calls if c["ttft_s"] is not None]
    total = [c["total_s"] for c in calls]
    tokens = [c["tokens"] or 0 for c in calls]
    return {"requests": len(calls), "rounds": rounds,
            "ttft_s_p50": round(statistics.median(ttft), 3) if ttft else None,
            "ttft_s_max": round(max(ttft), 3) if ttft else None,
            "total_s_p50": round(statistics.median(total), 3), "total_s_max": round(max(total), 3),
            "tokens_mean": round(statistics.mean(tokens), 1), "wall_s_per_round": round(wall / rounds, 3),
            "tokens_per_s_all_clients": round(sum(tokens) / wall, 1)}


async def measure(url: str, model: str, args) -> dict:
    headers = {"Authorization": f"Bearer {args.api_key}"}
    limits = httpx.Limits(max_connections=max(args.clients) + 4)
    report: dict = {"samples": {}}
    async with httpx.AsyncClient(timeout=args.timeout, headers=headers, limits=limits) as client:
        for name in args.prompts:  # the answers as a customer would get them (no forced length)
            report["samples"][name] = await one_call(client, url, model, PROMPTS[name], args)
        for clients in args.clients:
            calls: list[dict] = []
            wall = 0.0
            for _ in range(args.rounds):
                prompts = [PROMPTS[args.prompts[i % len(args.prompts)]] for i in range(clients)]
                start = time.perf_counter()
                calls += await asyncio.gather(*(one_call(client, url, model, p, args, args.min_tokens)
                                                for p in prompts))
                wall += time.perf_counter() - start
            report[f"{clients}_clients"] = summary(calls, wall, args.rounds)
    return report


def served_model(url: str, api_key: str) -> str:
    response = httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {api_key}"}, timeout=10)
    response.raise_for_status()
    return response.json()["data"][0]["id"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8001/v1", help="OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model", default="", help="model name to send; default: the first one the endpoint serves")
    parser.add_argument("--api-key", default="unused")
    parser.add_argument("--start", default="", metavar="LOCAL_LLM",
                        help="start this local stand-in (qwen2.5-0.5b, qwen2.5-1.5b, smollm2) with vLLM on --port first, as "
                             "`tandem llm-server` does; report its ready time; stop it (its whole process group) after")
    parser.add_argument("--port", type=int, default=8011, help="port for --start")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8], help="concurrency levels")
    parser.add_argument("--rounds", type=int, default=3, help="batches per concurrency level")
    parser.add_argument("--max-tokens", type=int, default=60)
    parser.add_argument("--min-tokens", type=int, default=0, help="vLLM only: force answers this long (0: not sent)")
    parser.add_argument("--temperature", type=float, default=None, help="default: the engine's (generation config)")
    parser.add_argument("--prompts", nargs="+", default=list(PROMPTS), choices=list(PROMPTS))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--show", action="store_true", help="print the sample answers as text, too")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()

    server = None
    report: dict = {"loadavg_before": [round(x, 2) for x in os.getloadavg()]}
    try:
        url = args.url.rstrip("/")
        if args.start:
            sys.path.insert(0, str(REPO))
            os.environ.update({"TANDEM_LLM_MODEL": args.start, "TANDEM_LLM_URL": f"http://127.0.0.1:{args.port}/v1"})
            from core.settings import reset_settings
            from tandem.llm_server import LLMServer

            reset_settings()
            server = LLMServer()
            print(f"starting: {' '.join(server.command)}", file=sys.stderr)
            start = time.perf_counter()
            server.start(wait=True, timeout=args.timeout * 2, warmup=False)
            report["ready_s"] = round(time.perf_counter() - start, 1)
            warm = time.perf_counter()
            server.warm_up()  # the engine's first generation pays one-off setup; no measured call should
            report["warmup_s"] = round(time.perf_counter() - warm, 2)
            url = server.url
        model = args.model or served_model(url, args.api_key)
        report.update({"url": url, "model": model, "max_tokens": args.max_tokens, "min_tokens": args.min_tokens,
                       "temperature": args.temperature})
        report.update(asyncio.run(measure(url, model, args)))
    finally:
        if server is not None:
            server.stop()
    report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.show:
        for name, sample in report["samples"].items():
            print(f"--- {name} ({sample['tokens']} tokens, first token {sample['ttft_s']:.2f} s, "
                  f"total {sample['total_s']:.2f} s)\n{sample['text']}", file=sys.stderr)
    text = json.dumps(report, indent=1, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
