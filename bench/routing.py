"""Section 1: routing overhead per stage, in process (a runtime without LLM over the demo KB),
and one pyinstrument profile of the same hot path."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from bench.common import mean, pct, rng
from bench.traffic import TOOL_MESSAGES, TOOL_USER, mixed_queries
from chains.schema import ChatRequest
from chains.tiers.base import CACHE_ROUTE, GUARD_ROUTE, LLM_ROUTE, SMALL_ROUTE, TOOL_ROUTE

STAGES = ("guard", "cache", "rules", "embed", "score", "retrieve")
# What the issue calls routing overhead: everything before a tier answers, retrieval reported on its own.
OVERHEAD_STAGES = ("guard", "cache", "rules", "embed", "score")
PROJECT_DIRS = ("/chains/", "/knowledge/", "/storage/", "/tandem/", "/app/")


def _requests(sizes) -> list[ChatRequest]:
    """Unique dataset queries, every 10th an order question (tool), and from the second third on a repeat
    of an earlier question every few messages (cache), so a run cut short by its budget keeps the mix."""
    queries = mixed_queries(sizes.routing_queries)
    out: list[ChatRequest] = []
    shuffle = rng()
    every = max(2, (2 * len(queries) // 3) // max(sizes.cache_repeats, 1))
    for index, query in enumerate(queries):
        if index % 10 == 5:
            out.append(ChatRequest(message=TOOL_MESSAGES[index % len(TOOL_MESSAGES)], user_id=TOOL_USER,
                                   channel="batch"))
        out.append(ChatRequest(message=query.text, channel="batch"))
        if index >= len(queries) // 3 and index % every == 0:
            earlier = queries[shuffle.randrange(index)]
            out.append(ChatRequest(message=earlier.text, channel="batch"))
    return out


def run_routing(runtime, sizes, log: Callable[[str], None]) -> dict:
    service = runtime.service
    for warm in ("hello", "how do I return an item?", "warm-up three"):  # first calls pay lazy loads
        service.answer(ChatRequest(message=warm, channel="batch"))
    runtime.state.cache_clear()
    requests = _requests(sizes)
    log(f"  routing {len(requests)} messages in process (demo KB, {len(runtime.kb)} answers)")
    rows = []
    deadline = time.perf_counter() + sizes.routing_budget_s
    for request in requests:
        rows.append(service.answer(request))
        if time.perf_counter() > deadline:  # a crowded machine: report what was measured, and say so
            log(f"  routing budget of {sizes.routing_budget_s:.0f} s spent after {len(rows)} messages")
            break
    per_stage = {stage: pct([r.latency_ms[stage] for r in rows if stage in r.latency_ms])
                 for stage in STAGES}
    routed = [r for r in rows if r.route != "guard"]
    overhead = [sum(r.latency_ms.get(s, 0.0) for s in OVERHEAD_STAGES) for r in routed]
    by_route: dict[str, dict] = {}
    for route in (CACHE_ROUTE, TOOL_ROUTE, SMALL_ROUTE, LLM_ROUTE, GUARD_ROUTE):
        totals = [r.latency_ms["total"] for r in rows if r.route == route]
        if totals:
            by_route[route] = {**pct(totals), "mean": mean(totals)}
    small_totals = [r.latency_ms["total"] for r in rows if r.route == SMALL_ROUTE]
    # What an always-LLM system spends before its call: guard, embedding, retrieval and the log write.
    pre_llm = [r.latency_ms["total"] - sum(r.latency_ms.get(s, 0.0) for s in ("cache", "rules", "score"))
               for r in rows if r.route == SMALL_ROUTE]
    return {
        "queries": len(rows), "planned_queries": len(requests), "stopped_at_budget": len(rows) < len(requests),
        "kb": "demo (knowledge/demo), temp TANDEM_HOME", "kb_answers": len(runtime.kb),
        "stages_ms": per_stage,
        "routing_overhead_ms": pct(overhead),
        "routing_overhead_definition": "guard + cache + rules + embed + score per message (stages it ran); "
                                       "retrieve reported separately",
        "routing_plus_retrieve_ms": pct([o + r.latency_ms.get("retrieve", 0.0) for o, r in zip(overhead, routed)]),
        "server_total_by_route_ms": by_route,
        "route_counts": {route: sum(r.route == route for r in rows)
                         for route in (CACHE_ROUTE, TOOL_ROUTE, SMALL_ROUTE, GUARD_ROUTE)},
        "note": "use_llm=False: LLM-bound messages are answered by the small tier, so every turn is routing only",
        "_small_totals": small_totals, "_pre_llm": pre_llm,
    }


def run_profile(runtime, sizes, out_path: Path, log: Callable[[str], None]) -> dict:
    """Profile `TandemService.answer` over fresh messages (no cache hits) and name the hot spots."""
    service = runtime.service
    from pyinstrument import Profiler

    # mixed_queries is prefix-stable: the slice after the routing queries is unseen by the service.
    queries = mixed_queries(sizes.routing_queries + sizes.profile_queries)[sizes.routing_queries:]
    service.answer(ChatRequest(message="warm-up", channel="batch"))
    log(f"  profiling {len(queries)} routed messages with pyinstrument")
    profiler = Profiler(interval=0.0005)
    profiled = 0
    deadline = time.perf_counter() + sizes.profile_budget_s
    profiler.start()
    for query in queries:
        service.answer(ChatRequest(message=query.text, channel="batch"))
        profiled += 1
        if time.perf_counter() > deadline:
            break
    profiler.stop()
    if profiled < len(queries):
        log(f"  profile budget of {sizes.profile_budget_s:.0f} s spent after {profiled} messages")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(profiler.output_text(unicode=True, color=False, show_all=False))
    session = profiler.last_session
    return {"queries": profiled, "report": str(out_path), **hot_spots(session.root_frame() if session else None),
            "embed_ms_by_torch_threads": embed_threads(runtime.encoder, queries[:30])}


def embed_threads(model, queries) -> dict:
    """One-message MiniLM embedding at 1 torch thread vs the default, interleaved so both see the same load:
    evidence for the thread setting suggested to the lead (the service itself is not changed)."""
    import torch

    default = torch.get_num_threads()
    samples: dict[int, list[float]] = {1: [], default: []}
    try:
        for index, query in enumerate(queries):
            for threads in ((1, default) if index % 2 else (default, 1)):
                torch.set_num_threads(threads)
                began = time.perf_counter()
                model.encode_queries([query.text])  # not encode_query: the memo would hide the second call
                samples[threads].append((time.perf_counter() - began) * 1000)
    finally:
        torch.set_num_threads(default)
    return {f"threads_{n}": pct(v, 50, 95) for n, v in samples.items()}


def hot_spots(root, limit: int = 8) -> dict:
    """Inclusive time of our own functions (outermost call only) and self time of any function, in ms."""
    if root is None:
        return {"total_ms": 0.0, "inclusive_ms": [], "self_ms": []}
    inclusive: dict[str, float] = {}
    own: dict[str, float] = {}

    def name(frame) -> str:
        where = (frame.file_path or "?").split("site-packages/")[-1]
        for marker in PROJECT_DIRS:
            if marker in where:
                where = marker.strip("/") + "/" + where.split(marker, 1)[1]
                break
        return f"{frame.function} ({where}:{frame.line_no})"

    def walk(frame, active: frozenset[str]) -> None:
        if frame.is_synthetic:  # "[self]" and "[await]" leaves are already in their parent's self time
            return
        key = name(frame)
        own[key] = own.get(key, 0.0) + frame.total_self_time
        path = frame.file_path or ""
        if any(m in path for m in PROJECT_DIRS) and "site-packages" not in path and key not in active:
            inclusive[key] = inclusive.get(key, 0.0) + frame.time
            active = active | {key}
        for child in frame.children:
            walk(child, active)

    walk(root, frozenset())
    top = lambda d: [{"function": k, "ms": round(v * 1000, 1)}  # noqa: E731
                     for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:limit]]
    return {"total_ms": round(root.time * 1000, 1), "inclusive_ms": top(inclusive), "self_ms": top(own)}
