"""`make soak`: a bounded soak test on loopback against a real app this script starts.

Open-loop traffic at a fixed rate (default 20 requests/s for 5 minutes) over mixed routes: cache hits,
the order tool, knowledge-base (small tier) questions and LLM-bound questions. By default the LLM tier
points at a closed port, so LLM-bound messages take the honest fallback (route small, fallback true):
the CPU stand-in LLM cannot serve 5 requests/s. Pass --llm-url to aim them at a real endpoint.

Reports errors (must be 0), requests sent vs rows logged (must be equal), client latency, and the app's
resident memory at start and end (growth in MiB and %). Writes reports/soak.json.

    python -m bench.soak --duration 300 --rate 20
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from chains.tiers.base import CACHE_ROUTE, LLM_ROUTE, SMALL_ROUTE, TOOL_ROUTE
from tandem.processes import free_port

REPO = Path(__file__).resolve().parent.parent
CHAT = "/api/v1/chat"

# (route it should take, message, user). The cache set repeats, so after its first pass it is served
# from the cache; tool messages name alice's demo orders; small ones are demo FAQ questions.
TRAFFIC = {
    "cache": [("What are your opening hours?", ""), ("How do I reset my password?", ""),
              ("Do you ship internationally?", "")],
    "tool": [("Where is my order NW-104233?", "alice"), ("has NW-104871 shipped yet?", "alice"),
             ("What is the status of order NW-105390?", "alice"), ("Where is my order NW-104233?", "bob")],
    SMALL_ROUTE: [("how do i track my package", ""), ("Can I change the delivery address?", ""),
              ("how long does a refund take", ""), ("can I return a gift", ""), ("my parcel arrived damaged", "")],
    "llm": [("Write a short poem about my late parcel and the rain in Paris", ""),
            ("Compare your return policy with other shops and explain which is fairer", ""),
            ("Which of your products would make a good gift for a tea lover under 50 dollars and why?", "")],
}


def _messages() -> itertools.cycle:
    """Round-robin over the routes, each with its own rotating list; sessions are unique per request."""
    order = [CACHE_ROUTE, TOOL_ROUTE, SMALL_ROUTE, LLM_ROUTE]
    per_route = {route: itertools.cycle(items) for route, items in TRAFFIC.items()}
    return itertools.cycle([(route, per_route[route]) for route in order])


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def run_soak(url: str, duration_s: float, rate: float, count_rows: Callable[[], int] | None = None,
             rss_mib: Callable[[], float] | None = None, log: Callable[[str], None] = print) -> dict:
    """Send `rate` requests/s for `duration_s` seconds (open loop) and summarise what came back."""
    total = int(duration_s * rate)
    mix = _messages()
    results: list[dict] = []
    lock = threading.Lock()
    rows_before = count_rows() if count_rows else None
    rss_start = rss_mib() if rss_mib else None
    rss_samples = [rss_start] if rss_start is not None else []

    def send(client: httpx.Client, route: str, message: str, user: str) -> None:
        started = time.perf_counter()
        try:
            reply = client.post(url + CHAT, json={"message": message, "user_id": user})
            body = reply.json()
            item = {"expected": route, "status": reply.status_code, "route": body.get("route"),
                    "fallback": body.get("fallback"), "ms": (time.perf_counter() - started) * 1000,
                    "error": None if reply.status_code == 200 else str(body.get("error"))[:200]}
        except (httpx.HTTPError, ValueError) as exc:
            item = {"expected": route, "status": 0, "route": None, "fallback": None,
                    "ms": (time.perf_counter() - started) * 1000, "error": f"{exc.__class__.__name__}: {exc}"[:200]}
        with lock:
            results.append(item)

    started = time.perf_counter()
    next_sample = started + 10
    with httpx.Client(timeout=60.0, limits=httpx.Limits(max_connections=64)) as client, \
            ThreadPoolExecutor(64) as pool:
        for index in range(total):
            due = started + index / rate
            while (now := time.perf_counter()) < due:
                time.sleep(min(0.01, due - now))
            if rss_mib and now >= next_sample:
                rss_samples.append(rss_mib())
                next_sample += 10
                log(f"  {now - started:5.0f} s: {len(results)} answered, rss {rss_samples[-1]:.0f} MiB")
            route, items = next(mix)
            message, user = next(items)
            pool.submit(send, client, route, message, user)
    elapsed = time.perf_counter() - started
    rss_end = rss_mib() if rss_mib else None
    if rss_end is not None:
        rss_samples.append(rss_end)
    time.sleep(0.5)  # rows are written before each answer returns; this only lets the last commit land
    rows_added = count_rows() - rows_before if count_rows and rows_before is not None else None

    errors = [r for r in results if r["status"] != 200]
    by_route: dict[str, dict[str, int]] = {}
    for r in results:
        got = by_route.setdefault(r["expected"], {})
        key = f"{r['route']}{' (fallback)' if r['fallback'] else ''}"
        got[key] = got.get(key, 0) + 1
    latencies = [r["ms"] for r in results if r["status"] == 200]
    summary = {
        "duration_s": round(elapsed, 1), "target_rate_per_s": rate, "sent": total,
        "achieved_rate_per_s": round(total / elapsed, 2) if elapsed else None,
        "answered": len(results) - len(errors), "errors": len(errors),
        "error_samples": [e["error"] for e in errors[:5]],
        "rows_logged": rows_added, "requests_lost": (total - rows_added) if rows_added is not None else None,
        "routes": by_route,
        "client_ms": {"p50": _pct(latencies, 0.5), "p95": _pct(latencies, 0.95), "p99": _pct(latencies, 0.99),
                      "max": round(max(latencies), 1) if latencies else None},
        "rss_mib": {"start": rss_start, "end": rss_end, "peak_sampled": max(rss_samples) if rss_samples else None,
                    "growth_mib": round(rss_end - rss_start, 1) if rss_start and rss_end else None,
                    "growth_pct": round(100 * (rss_end - rss_start) / rss_start, 1) if rss_start and rss_end else None},
    }
    return summary


def _start_app(home: Path, llm_url: str | None):
    from bench.http_load import App

    env = {**os.environ, "TANDEM_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "GRADIO_ANALYTICS_ENABLED": "False", "TANDEM_API_TOKEN": "",
           # the soak is many customers behind one client: the per-user limit would only measure itself
           "TANDEM_RATE_LIMIT_PER_MIN": "0",
           "TANDEM_LLM_URL": llm_url or f"http://127.0.0.1:{free_port()}/v1",
           "TANDEM_LLM_RETRIES": "0" if not llm_url else os.environ.get("TANDEM_LLM_RETRIES", "2"),
           "TANDEM_LLM_TIMEOUT_S": "2" if not llm_url else os.environ.get("TANDEM_LLM_TIMEOUT_S", "20")}
    env.setdefault("TANDEM_MODEL_DIR", str(REPO / ".tandem" / "models"))
    return App(port=free_port(), env=env, log_path=home / "soak-app.log").start(timeout=600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of traffic (default 300)")
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second (default 20)")
    parser.add_argument("--llm-url", default=None, help="a real OpenAI-compatible endpoint for LLM-bound messages "
                        "(default: none; they take the fallback)")
    parser.add_argument("--max-growth-pct", type=float, default=25.0, help="fail when RSS grows more than this")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "soak.json")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.rate <= 0:
        parser.error("--duration and --rate must be positive")

    with tempfile.TemporaryDirectory(prefix="tandem-soak-") as folder:
        home = Path(folder)
        print(f"starting the app in {home} (seeds the demo KB first; a minute or two)")
        app = _start_app(home, args.llm_url)
        try:
            db = home / "tandem.db"

            def count_rows() -> int:
                with sqlite3.connect(db, timeout=30) as conn:
                    return conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]

            print(f"soak: {args.rate:g} requests/s for {args.duration:g} s against {app.url}")
            summary = run_soak(app.url, args.duration, args.rate, count_rows=count_rows,
                               rss_mib=lambda: app.rss_mib()["rss_mib"])
        finally:
            app.stop()
    summary["llm"] = args.llm_url or "none: LLM-bound messages answered by the fallback (route small, fallback true)"
    summary["cold_start_s"] = app.cold_start_s
    growth = summary["rss_mib"]["growth_pct"]
    summary["passed"] = (summary["errors"] == 0 and summary["requests_lost"] == 0
                         and growth is not None and growth <= args.max_growth_pct)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out}")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
