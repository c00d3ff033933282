"""Does the idle-time worker delay live traffic? (issue 42: "0 live requests waiting on it; p95 of live LLM calls
within 5 % of the run without it".)

The mixed trace (bench/mixed_trace.py) sends its messages back to back, so the engine is never idle and the worker
never sends anything during the trace. Here live messages arrive with gaps, as customers type: the held-out
out-of-scope turns of the demo-shop conversations (the ones the router sends to the LLM), at times drawn from an
exponential distribution (mean ``--gap`` seconds, fixed seed), one at a time. The same schedule is replayed twice
on one real vLLM server (prefix caching on, its cache reset between passes): with the worker off, then with the
worker on (a look every second, an unlimited token budget) over yesterday's log of the mixed trace (its recurring
LLM-bound groups). The worst case for live traffic: the worker here tries a question again at once after an attempt
stored nothing (ops.prepared.RETRY_AFTER_S 0 instead of an hour), so it has work in every gap for the whole pass.
Each pass has its own copy of the database and an empty answer cache; the live messages are distinct, so no live
message is served from the cache.

Reported per pass: the live LLM calls' latency (mean, p50, p95), and for the worker pass its requests (sent,
cancelled by live traffic, stored) and tokens; the live requests that arrived while a worker request was in flight
("overlapped": they are the ones that could wait on it), and each overlapped request's latency minus the same
message's latency in the pass without the worker.

    python -m bench.idle_interference [--live 24] [--gap 4] [--out reports/idle_interference.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.common import mean, pct, replay_setup, standalone
from bench.mixed_trace import TimedWorker, copy_db, history_db, start_servers
from bench.trace_build import Msg, load_sessions

SEED = 7
GAP_S = 4.0     # mean seconds between live messages
# A live request slower than without the worker by less than this is not waiting on it: CPU sharing slowed a 9 ms
# small-tier answer to 11 ms in the first run, which 20 % alone counted (README, idle-time worker).
WAIT_MS = 100.0
BUDGET = 10**9  # tokens an hour: the worker is limited by idle time alone here


def live_messages(n: int) -> list[Msg]:
    """The first ``n`` held-out out-of-scope turns of the demo-shop conversations (LLM-bound, all distinct)."""
    seen, out = set(), []
    for session in load_sessions("heldout"):
        for m in session:
            if not m.answer_id and m.text not in seen:
                seen.add(m.text)
                out.append(m)
    return out[:n]


def schedule(n: int, gap_s: float, seed: int = SEED) -> list[float]:
    """Arrival times (seconds from the start) with exponential gaps of mean ``gap_s``."""
    rng, at, out = random.Random(seed), 0.0, []
    for _ in range(n):
        out.append(at)
        at += rng.expovariate(1 / gap_s)
    return out


def replay(service, messages: list[Msg], arrivals: list[float]) -> list[dict[str, Any]]:
    """Each message at its arrival time (or right after the previous one ends, if that is later)."""
    from chains.schema import ChatRequest

    rows, start = [], time.perf_counter()
    for i, (m, at) in enumerate(zip(messages, arrivals)):
        time.sleep(max(0.0, start + at - time.perf_counter()))
        began = time.perf_counter()
        response = service.answer(ChatRequest(message=m.text, session_id=f"live-{i}", user_id="live", channel="api"))
        rows.append({"text": m.text, "ms": (time.perf_counter() - began) * 1000, "llm": bool(response.model),
                     "route": response.route, "began": began})
    return rows


def run_pass(name: str, settings, kb, template: Path, folder: Path, server, messages, arrivals, log) -> dict:
    from chains.runtime import build_runtime
    from ops import prepared
    from storage.db import open_database

    reset = httpx.post(server.url.removesuffix("/v1") + "/reset_prefix_cache", timeout=60)
    log(f"  idle interference [{name}]: prefix cache reset {reset.status_code}")
    db_path = folder / f"{name.replace(' ', '-')}.db"
    copy_db(template, db_path)
    runtime = build_runtime(settings.model_copy(update={"llm_url": server.url}), db=open_database(f"sqlite:///{db_path}"),
                            kb=kb)
    worker = TimedWorker(runtime.service, BUDGET) if name == "worker on" else None
    retry_after = prepared.RETRY_AFTER_S
    prepared.RETRY_AFTER_S = 0.0  # the worst case: always a question to prepare (module docstring)
    tokens = 0
    try:
        if worker is not None:
            worker.worker.start()
        rows = replay(runtime.service, messages, arrivals)
    finally:
        if worker is not None:
            worker.worker.stop()
            tokens = prepared.tokens_spent(runtime.db, datetime.min.replace(tzinfo=UTC))
        runtime.close()
        prepared.RETRY_AFTER_S = retry_after
    for row in rows:  # the worker's spans are complete only now: a request in flight is recorded when it ends
        row["overlapped"] = worker is not None and worker.busy_at(row.pop("began"))
    llm_ms = [r["ms"] for r in rows if r["llm"]]
    spread = pct(llm_ms, 50, 95)
    out: dict[str, Any] = {"live": len(rows), "live_llm": len(llm_ms), "mean_ms": round(mean(llm_ms) or 0),
                           "p50_ms": round(spread["p50"] or 0), "p95_ms": round(spread["p95"] or 0), "rows": rows}
    if worker is not None:
        looks = worker.looks  # one outcome per look; a look that sent a request ends prepared, rejected or cancelled
        out["worker"] = {"requests": len(worker.spans), "looks": {k: looks.count(k) for k in sorted(set(looks))},
                         "overlapped_live": sum(r["overlapped"] for r in rows),
                         "logged": sum(looks.count(k) for k in ("prepared", "rejected", "cancelled")),
                         "cancelled": looks.count("cancelled"), "stored": looks.count("prepared"), "tokens": tokens}
    log(f"  idle interference [{name}]: {json.dumps({k: v for k, v in out.items() if k != 'rows'})}")
    return out


def compare(off: dict, on: dict) -> dict[str, Any]:
    """Live LLM p95 with the worker over without, and the overlapped requests' latency against the same message's
    latency without the worker."""
    base = {r["text"]: r["ms"] for r in off["rows"]}
    extra = [r["ms"] - base[r["text"]] for r in on["rows"] if r["overlapped"] and r["text"] in base]
    return {"p95_ratio": round(on["p95_ms"] / off["p95_ms"], 3) if off["p95_ms"] else None,
            "mean_ratio": round(on["mean_ms"] / off["mean_ms"], 3) if off["mean_ms"] else None,
            "overlapped": len(extra), "overlapped_extra_ms": [round(x) for x in extra],
            "overlapped_waiting": sum(1 for r in on["rows"] if r["overlapped"] and r["text"] in base
                                      and r["ms"] > 1.2 * base[r["text"]] and r["ms"] - base[r["text"]] > WAIT_MS)}


def run(settings, live: int, gap_s: float, log, servers: dict[bool, Any] | None = None) -> dict[str, Any]:
    """Both passes on one vLLM with prefix caching on: its own, or ``servers[True]`` (from
    bench.mixed_trace.start_servers, left running; each pass resets its cache first)."""
    folder, settings, kb = replay_setup(settings, "tandem-idle-")
    template, _ = history_db(settings, kb, folder, log)
    messages = live_messages(live)
    arrivals = schedule(len(messages), gap_s)
    own = servers is None
    try:
        if servers is None:
            servers = start_servers(settings, folder, log, {True})
        passes = {name: run_pass(name, settings, kb, template, folder, servers[True], messages, arrivals, log)
                  for name in ("worker off", "worker on")}
    finally:
        for server in (servers or {}).values() if own else ():
            server.stop()
    compared = compare(passes["worker off"], passes["worker on"])
    return {"live": len(messages), "gap_s": gap_s, "model": settings.llm_model, "passes": passes,
            "compare": compared, "targets": targets(compared)}


def targets(compared: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 42's targets for idle-time work, next to what was measured (never asserted). A live request "waits on"
    the worker when it arrived during a worker request and took over 20 % and over WAIT_MS longer than without it."""
    rows = [("live LLM p95, idle-time worker on / off", "<= 1.05", compared["p95_ratio"], lambda v: v <= 1.05),
            ("live requests waiting on idle-time work", "0", compared["overlapped_waiting"],
             lambda v: v == 0)]
    return [{"metric": m, "target": t, "measured": v, "met": None if v is None else bool(ok(v))}
            for m, t, v, ok in rows]


def table(result: dict[str, Any]) -> list[str]:
    lines = ["| pass | live LLM calls | mean ms | p50 ms | p95 ms | worker requests (cancelled, stored) | "
             "worker tokens | live requests overlapped |", "|---|---|---|---|---|---|---|---|"]
    for name, p in result["passes"].items():
        w = p.get("worker")
        lines.append(f"| {name} | {p['live_llm']} | {p['mean_ms']:,} | {p['p50_ms']:,} | {p['p95_ms']:,} | "
                     + (f"{w['logged']} ({w['cancelled']}, {w['stored']}) | {w['tokens']:,} | {w['overlapped_live']} |"
                        if w else "– | – | – |"))
    c = result["compare"]
    lines += ["", "| target | wanted | measured | met |", "|---|---|---|---|"]
    lines += [f"| {t['metric']} | {t['target']} | {t['measured']} | {t['met']} |" for t in result["targets"]]
    lines += ["", f"Live LLM p95 with the worker / without: **{c['p95_ratio']}** (mean {c['mean_ratio']}); "
                  f"overlapped live requests: {c['overlapped']}, their latency minus the same message's without the "
                  f"worker (ms): {c['overlapped_extra_ms']}."]
    return lines


def main(argv: list[str] | None = None) -> int:
    from core.settings import get_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", type=int, default=24, help="live LLM-bound messages")
    parser.add_argument("--gap", type=float, default=GAP_S, help="mean seconds between live messages")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    return standalone(lambda log: run(get_settings(), args.live, args.gap, log), table, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
