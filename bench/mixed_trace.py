"""All three caches of issue 42 on one replayed mixed trace, each off and on, side by side in one run.

The trace. The held-out conversations of the hand-written demo-shop sessions (:func:`load_sessions`:
knowledge/eval/demo_sessions.csv), and into them, at random places, repeats of a few frequent LLM-bound questions: dev
messages that the router really sends to the LLM (out of scope first), in exact or near-exact wording (case,
punctuation, a greeting), so that they make ``--repeat-share`` (30 %) of the trace's messages. Sessions are replayed
interleaved, a few open at a time, one message at a time, so each LLM call's vLLM counters are its own.

Yesterday's history. The dev split's sessions, with the frequent questions asked again in sessions of their own, go
once through the real chain (real Chroma, encoder, SQLite) without an LLM: every message is routed and logged as the
service logs it. A message the router sent to the LLM was answered from the KB because no engine was there, and is
marked ``degraded`` in its row (as if the engine had been busy yesterday): that is what ops/recurring.py counts as
LLM-bound, so the recurring groups the idle-time worker prepares from exist before the trace. Each pass starts on a
copy of that database (so every pass has the same history and none sees another's rows) and an empty cache.

The passes: all off; prefix caching alone; the answer cache with prepared answers alone; follow-ups alone; all on.
The answer cache also remembers what replaced a failed LLM answer (TANDEM_CACHE_REPLACED_ANSWERS): its hits are
counted apart from the prepared ones.
Prefix caching runs on one vLLM started with --enable-prefix-caching (its cache reset between passes through vLLM's
dev endpoint), the other passes on a second one started with --no-enable-prefix-caching. With prepared answers on, an
idle window runs before the trace: the worker's ``run_once`` until it has nothing left, its budget is spent or
``IDLE_CAP_S`` passes; then the worker's thread keeps running during the trace (every second), and a live request
that starts while one of its LLM requests is in flight counts as waiting on idle-time work. Follow-ups: the replayed
customer clicks a suggestion only when the next message's labelled answer is among the suggestions offered (an upper
bound of click-through), sending its title as text with ``suggestion`` set.

Measured per pass: LLM calls (the LLM client's finished calls during the trace), mean and p95 latency and time to
first text (the first text piece the service streams, which is what the customer sees; an LLM answer is shown once
checked), answer-cache hits (prepared, and remembered replacements), vLLM's prefix-cache hit rate on turns 2+
(counter differences around each message), suggestion clicks, and the idle window's tokens and stored answers.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import mean, pct, replay_setup, standalone
from bench.trace_build import SESSIONS_CSV, Msg, build_trace, interleave, load_sessions

FREQUENT = 6             # frequent LLM-bound questions
HISTORY_COPIES = 3       # extra sessions per frequent question in the history
IDLE_CAP_S = 300.0       # the idle window before the trace stops here at the latest
PREPARE_BUDGET = 20_000  # tokens an hour when TANDEM_PREPARE_TOKENS_PER_HOUR is 0 (the README's example)
PASSES = {"all off": (False, False, False), "prefix caching": (True, False, False),
          "answer cache + prepared": (False, True, False), "follow-ups": (False, False, True),
          "all on": (True, True, True)}  # name: (prefix caching, answer cache + prepared, follow-ups)


@dataclass
class Row:
    turn: int
    repeat: bool
    route: str
    total_ms: float
    first_text_ms: float
    llm: bool
    cache: bool = False
    prepared: bool = False
    replaced: bool = False  # a remembered replacement of a failed LLM answer (chains.router_chain.REPLACED_ORIGIN)
    clicked: bool = False
    offered: int = 0
    prefix: tuple[float, float] = (0.0, 0.0)
    waited: bool = False
    started: float = field(default=0.0, repr=False)


def history_db(settings, kb, folder: Path, log) -> tuple[Path, list[str]]:
    """Yesterday's log in a SQLite file: the dev sessions through the chain without an LLM, then the frequent
    questions (chosen from what the router sent to the LLM) asked again; LLM-bound rows marked degraded."""
    from chains.cache import ResponseCache
    from chains.runtime import build_runtime
    from storage.db import open_database

    path = folder / "history.db"
    # No cache: a repeat would be a cache hit, not an LLM-bound message of the log.
    runtime = build_runtime(settings.model_copy(update={"response_cache": False}),
                            db=open_database(f"sqlite:///{path}"), kb=kb, use_llm=False)
    dev = load_sessions("dev")
    bound: dict[str, tuple[bool, float]] = {}
    for msgs in dev:
        for m in msgs:
            r = ask(runtime.service, m, None)
            if any(s.get("stage") == "load" and s.get("decision") == "no LLM configured" for s in r.trace):
                bound[m.text] = (bool(m.answer_id), -r.scores.get("p_llm", 0.0))
    frequent = [t for t, _ in sorted(bound.items(), key=lambda kv: kv[1]) if ResponseCache.cacheable(t)[0]][:FREQUENT]
    for copy in range(HISTORY_COPIES):
        for i, text in enumerate(frequent):
            ask(runtime.service, Msg(f"dev-freq-{copy}-{i}", text), None)
    marked = mark_llm_bound(runtime.db)
    runtime.close()
    log(f"  mixed trace: history of {sum(map(len, dev))} dev messages + {HISTORY_COPIES * len(frequent)} repeats, "
        f"{marked} LLM-bound; frequent: {frequent}")
    return path, frequent


def mark_llm_bound(db) -> int:
    from sqlmodel import select

    from storage.tables import RequestLog

    with db.session() as s:
        rows = [r for r in s.exec(select(RequestLog)).all()
                if any(t.get("decision") == "no LLM configured" for t in r.trace or [])]
        for r in rows:
            r.degraded = True
            s.add(r)
        s.commit()
    return len(rows)


def copy_db(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database, its write-ahead log included (a file copy would miss the WAL)."""
    import sqlite3

    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def ask(service, m: Msg, suggestion: str | None):
    return service.answer(request_of(m, suggestion))


class TimedWorker:
    """The idle-time worker (ops/prepared.py), each LLM request it sends timed, so live overlap can be counted."""

    def __init__(self, service, budget: int):
        from ops.prepared import PreparedWorker

        self.spans: list[tuple[float, float]] = []
        self.looks: list[str] = []
        spans, looks = self.spans, self.looks

        class Worker(PreparedWorker):
            def one_pass(self) -> None:  # the thread's looks (during the trace)
                super().one_pass()
                looks.append(self.last.outcome if self.last else "")

            def _prepare(self, candidate, spent):
                began = time.perf_counter()
                try:
                    return super()._prepare(candidate, spent)
                finally:
                    spans.append((began, time.perf_counter()))

        self.worker = Worker(service, budget, every_s=1.0)

    def idle_window(self, cap_s: float = IDLE_CAP_S) -> dict[str, Any]:
        outcomes: dict[str, int] = {}
        tokens, began = 0, time.perf_counter()
        while time.perf_counter() - began < cap_s:
            report = self.worker.run_once()
            outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1
            tokens += report.tokens
            if report.outcome in ("nothing", "budget", "off", "lease"):
                break
            if report.outcome == "busy":
                time.sleep(0.2)
        self.idle_calls = len(self.spans)
        return {"idle_s": round(time.perf_counter() - began, 1), "tokens": tokens,
                "stored": outcomes.get("prepared", 0), "outcomes": outcomes}

    def busy_at(self, t: float) -> bool:
        return any(a <= t <= b for a, b in self.spans)


def replay(runtime, order: list[tuple[Msg, int]], url: str, follow: bool) -> list[Row]:
    """One message at a time; a suggestion offered for the next labelled answer is clicked (upper bound)."""
    from bench.prefix_reuse import counters
    from chains.schema import ChatResponse

    rows: list[Row] = []
    offered: dict[str, dict[str, str]] = {}
    with httpx.Client() as client:
        for m, turn in order:
            titles = offered.pop(m.session, {})
            click = follow and bool(m.answer_id) and m.answer_id in titles
            sent = Msg(m.session, titles[m.answer_id], m.answer_id) if click else m
            hits0, queries0 = counters(client, url)
            began, first, response = time.perf_counter(), None, None
            for item in runtime.service.stream(request_of(sent, m.answer_id if click else None)):
                if first is None and isinstance(item, str) and item:
                    first = time.perf_counter()
                elif isinstance(item, ChatResponse):
                    response = item
            end = time.perf_counter()
            hits1, queries1 = counters(client, url)
            assert response is not None
            suggestions = response.suggestions
            offered[m.session] = {s.answer_id: s.title for s in suggestions}
            step = next((s for s in response.trace if s.get("stage") == "cache"), {})
            origin = (step.get("detail") or {}).get("origin")
            rows.append(Row(turn, m.repeat, response.route, (end - began) * 1000, ((first or end) - began) * 1000,
                            bool(response.model), response.route == "cache", origin == "prepared",
                            origin == "replaced", click, len(suggestions), (hits1 - hits0, queries1 - queries0),
                            started=began))
    return rows


def request_of(m: Msg, suggestion: str | None):
    from chains.schema import ChatRequest

    return ChatRequest(message=m.text, session_id=f"s-{m.session}", user_id="trace", customer=f"c-{m.session}",
                       channel="api", suggestion=suggestion or "")


def run_pass(name: str, settings, kb, template: Path, order, servers: dict, folder: Path, log) -> dict[str, Any]:
    """One pass on a copy of the history database, with its own runtime (and so an empty cache)."""
    from chains.runtime import build_runtime
    from storage.db import open_database

    prefix, cached, follow = PASSES[name]
    server = servers[prefix]
    if prefix:
        reset = httpx.post(server.url.removesuffix("/v1") + "/reset_prefix_cache", timeout=60)
        log(f"  mixed trace [{name}]: prefix cache reset: {reset.status_code} {reset.text[:80]}")
    db_path = folder / f"pass-{list(PASSES).index(name)}.db"
    copy_db(template, db_path)
    update: dict[str, Any] = {"llm_url": server.url, "response_cache": cached, "followups": follow}
    runtime = build_runtime(settings.model_copy(update=update), db=open_database(f"sqlite:///{db_path}"), kb=kb)
    worker, idle = None, None
    try:
        if cached:
            worker = TimedWorker(runtime.service, settings.prepare_tokens_per_hour or PREPARE_BUDGET)
            idle = worker.idle_window()
            log(f"  mixed trace [{name}]: idle window {idle}")
            worker.worker.start()
        began = time.perf_counter()
        rows = replay(runtime, order, server.url, follow)
        trace_s = time.perf_counter() - began
    finally:
        if worker is not None:
            worker.worker.stop()
        runtime.close()
    during = [r for r in rows if worker is not None and worker.busy_at(r.started)]
    out = summarize(rows)
    out.update({"trace_s": round(trace_s, 1), "idle": idle, "followups": "on" if follow else "off",
                "idle_requests_during_trace": len(worker.spans) - worker.idle_calls if worker else 0,
                "idle_looks_during_trace": dict(Counter(worker.looks)) if worker else {},
                "live_during_idle_work": len(during), "live_llm_waiting_on_idle_work": sum(r.llm for r in during)})
    log(f"  mixed trace [{name}]: {json.dumps(out)}")
    return out


def summarize(rows: list[Row]) -> dict[str, Any]:
    totals, firsts = [r.total_ms for r in rows], [r.first_text_ms for r in rows]
    later = [r for r in rows if r.llm and r.turn >= 2]
    queries = sum(r.prefix[1] for r in later)
    return {"messages": len(rows), "repeats": sum(r.repeat for r in rows), "llm_calls": sum(r.llm for r in rows),
            "latency_ms": {"mean": mean(totals), **pct(totals, 50, 95)},
            "first_text_ms": {"mean": mean(firsts), **pct(firsts, 50, 95)},
            "cache_hits": sum(r.cache for r in rows), "prepared_hits": sum(r.prepared for r in rows),
            "replaced_hits": sum(r.replaced for r in rows),
            "cache_hit_rate": round(sum(r.cache for r in rows) / len(rows), 3) if rows else None,
            "llm_calls_turn2plus": len(later),
            "prefix_hit_rate_turn2plus": round(sum(r.prefix[0] for r in later) / queries, 3) if queries else None,
            "suggestions_offered": sum(r.offered > 0 for r in rows), "suggestion_clicks": sum(r.clicked for r in rows),
            "routes": {route: sum(r.route == route for r in rows) for route in sorted({r.route for r in rows})}}


def targets(passes: dict[str, dict]) -> list[dict[str, Any]]:
    """Issue 42's targets next to what was measured (never asserted)."""
    def ratio(a: str, b: str, *path: str) -> float | None:
        x: Any = passes.get(a)
        y: Any = passes.get(b)
        for key in path:
            x, y = (x or {}).get(key), (y or {}).get(key)
        return round(x / y, 3) if x is not None and y else None

    waiting = [p["live_llm_waiting_on_idle_work"] for p in passes.values() if p.get("idle")]
    rows = [("LLM calls, answer cache + prepared / all off", "<= 0.75", ratio("answer cache + prepared", "all off",
             "llm_calls"), lambda v: v <= 0.75),
            ("mean latency of the trace, all on / all off", "<= 0.6", ratio("all on", "all off", "latency_ms", "mean"),
             lambda v: v <= 0.6),
            ("live LLM requests waiting on idle-time work", "0", sum(waiting) if waiting else None, lambda v: v == 0)]
    return [{"metric": m, "target": t, "measured": v, "met": None if v is None else bool(ok(v))}
            for m, t, v, ok in rows]


def start_servers(settings, folder: Path, log, which: set[bool]) -> dict[bool, Any]:
    """vLLM with prefix caching on (its dev endpoint on, to reset the cache between passes) and off."""
    import os

    from bench.prefix_reuse import server_args
    from tandem.llm_server import LLMServer
    from tandem.processes import free_port

    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # POST /reset_prefix_cache
    servers: dict[bool, Any] = {}
    try:
        for caching in sorted(which, reverse=True):
            port = free_port()
            s = settings.model_copy(update={"vllm_args": server_args(settings, caching),
                                            "llm_url": f"http://127.0.0.1:{port}/v1"})
            servers[caching] = LLMServer(s, port=port, log_path=folder / f"vllm-{'on' if caching else 'off'}.log")
            began = time.perf_counter()
            servers[caching].start(timeout=900)
            log(f"  vLLM, prefix caching {'on' if caching else 'off'}, ready after "
                f"{time.perf_counter() - began:.0f} s ({servers[caching].model})")
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


def run(settings, n: int, log, share: float = 0.3, logs_dir: Path | None = None,
        passes: list[str] | None = None, servers: dict[bool, Any] | None = None) -> dict[str, Any]:
    """The whole bench: KB, history, trace, two vLLM servers, the five passes (servers stopped on the way out).
    ``servers`` (from start_servers) are used instead and left running: `make bench` shares one pair among its cache
    sections (each pass on the caching server resets its cache first)."""
    folder, settings, kb = replay_setup(settings, "tandem-trace-")
    template, frequent = history_db(settings, kb, folder, log)
    sessions = load_sessions("heldout")[:n]
    order = interleave(build_trace(sessions, frequent, share))
    result: dict[str, Any] = {"sessions": len(sessions), "messages": len(order), "repeat_share": share,
                              "frequent": frequent, "sessions_from": f"{SESSIONS_CSV.name} held-out", "max_tokens":
                              settings.llm_max_tokens, "prepare_tokens_per_hour": settings.prepare_tokens_per_hour
                              or PREPARE_BUDGET, "passes": {}}
    names = [name for name in PASSES if passes is None or name in passes]
    own = servers is None
    try:
        if servers is None:
            servers = start_servers(settings, logs_dir or folder, log, {PASSES[name][0] for name in names})
        result["model"] = next(iter(servers.values())).model
        for name in names:
            result["passes"][name] = run_pass(name, settings, kb, template, order, servers, folder, log)
    finally:
        for server in (servers or {}).values() if own else ():
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    result["targets"] = targets(result["passes"])
    return result


def table(trace: dict[str, Any]) -> list[str]:
    """Markdown lines: one row per pass, then the targets."""
    lines = [f"Mixed trace: {trace.get('sessions')} sessions, {trace.get('messages')} messages "
             f"({trace.get('repeat_share', 0):.0%} repeats of {len(trace.get('frequent') or [])} frequent LLM-bound "
             f"questions), one at a time, `{trace.get('model')}`, {trace.get('max_tokens')}-token answers:", "",
             "| pass | LLM calls | mean ms | p95 ms | first text mean ms | first text p95 ms | cache hits (prepared, "
             "replaced) "
             "| prefix hit rate, turns 2+ | suggestion clicks | idle tokens (answers stored) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, p in (trace.get("passes") or {}).items():
        rate, idle = p.get("prefix_hit_rate_turn2plus"), p.get("idle") or {}
        clicks = p.get("suggestion_clicks") if p.get("followups") == "on" else p.get("followups")
        lines.append(f"| {name} | {p['llm_calls']} | {p['latency_ms']['mean']:.0f} | {p['latency_ms']['p95']:.0f} | "
                     f"{p['first_text_ms']['mean']:.0f} | {p['first_text_ms']['p95']:.0f} | {p['cache_hits']} "
                     f"({p['prepared_hits']}, {p.get('replaced_hits', 0)}) | "
                     f"{'–' if rate is None else f'{rate:.1%}'} | {clicks} | "
                     + (f"{idle['tokens']} ({idle['stored']})" if idle else "–") + " |")
    lines += ["", "| target | wanted | measured | met |", "|---|---|---|---|"]
    lines += [f"| {t['metric']} | {t['target']} | {t['measured']} | {'–' if t['met'] is None else t['met']} |"
              for t in trace.get("targets") or []]
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.mixed_trace", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30, help="held-out sessions replayed")
    parser.add_argument("--share", type=float, default=0.3, help="share of the trace's messages that are repeats")
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    parser.add_argument("--passes", nargs="*", choices=list(PASSES), default=None, help="only these passes")
    args = parser.parse_args(argv)
    from core.settings import get_settings

    return standalone(lambda log: run(get_settings(), args.sessions, log, args.share, passes=args.passes), table,
                      args.out)


if __name__ == "__main__":
    raise SystemExit(main())
