"""Targets next to measured values (never asserted), and the dated markdown section of README.md."""

from __future__ import annotations

from pathlib import Path

from offline.readme import update_readme_section


def _get(data: dict, *path):
    for key in path:
        if not isinstance(data, dict) or data.get(key) is None:
            return None
        data = data[key]
    return data


def targets(result: dict) -> list[dict]:
    """Each target with its measured value and whether it was met (None when not measured)."""
    level64 = [c for c in result.get("concurrency", []) if c.get("clients") == 64]
    errors64 = sum(c["errors"] for c in level64) if level64 else None
    rows = [
        ("routing overhead p50", "<= 10 ms", _get(result, "routing_overhead_ms", "p50"), "ms", lambda v: v <= 10),
        ("cache hit p50 (server)", "<= 5 ms", _get(result, "cache_hit_ms", "p50"), "ms", lambda v: v <= 5),
        ("small answer p50 (server)", "<= 50 ms", _get(result, "small_answer_ms", "p50"), "ms", lambda v: v <= 50),
        ("hybrid mean latency / always-LLM", "<= 0.35", _get(result, "hybrid_vs_always_llm", "latency_mean_ratio"),
         "x", lambda v: v <= 0.35),
        ("LLM call share (hybrid)", "<= 50 %", _get(result, "hybrid_vs_always_llm", "llm_call_share"), "share",
         lambda v: v <= 0.5),
        ("errors at 64 clients", "0", errors64, "count", lambda v: v == 0),
        ("app RSS", "<= 2.5 GiB", result.get("rss_mib"), "MiB", lambda v: v <= 2560),
    ]
    return [{"metric": name, "target": target, "measured": value, "unit": unit,
             "met": None if value is None else bool(check(value))} for name, target, value, unit, check in rows]


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if unit == "share":
        return f"{value * 100:.1f} %"
    if unit == "x":
        return f"{value:.3f}"
    if isinstance(value, float):
        return f"{value:,.1f}{' ' + unit if unit and unit not in ('count',) else ''}"
    return f"{value}{' ' + unit if unit and unit not in ('count',) else ''}"


def markdown(result: dict) -> str:
    m = result.get("machine", {})
    lines = [
        f"Last run: **{result.get('date')}** ({'quick smoke run' if result.get('quick') else 'full run'}, "
        f"{result.get('duration_s')} s). Machine: {m.get('cores')} cores, {m.get('cpu')}, {m.get('ram_gib')} GiB RAM, "
        f"Python {m.get('python')}, torch {m.get('torch')}; load average at start {m.get('loadavg_start')} "
        "(shared machine: absolute numbers are noisy). Raw figures: `reports/bench.json`; profile: "
        "`reports/profile.txt`.",
        "",
        "| metric | measured | target | met |",
        "|---|---|---|---|",
    ]
    for row in result.get("targets", []):
        met = {True: "yes", False: "**no**", None: "n/a"}[row["met"]]
        lines.append(f"| {row['metric']} | {_fmt(row['measured'], row['unit'])} | {row['target']} | {met} |")
    extra = [
        ("routing overhead p95 / p99", _pair(result, "routing_overhead_ms", "p95", "p99", "ms")),
        ("retrieve p50 (reported apart)", _fmt(_get(result, "routing", "stages_ms", "retrieve", "p50"), "ms")),
        ("cold start (`tandem serve` to first answer)", _fmt(result.get("cold_start_s"), "s")),
        ("hybrid / always-LLM tokens", _fmt(_get(result, "hybrid_vs_always_llm", "token_ratio"), "x")),
    ]
    lines += [f"| {name} | {value} | | |" for name, value in extra]

    routes = _get(result, "end_to_end", "routes") or {}
    if routes:
        lines += ["", "End-to-end latency per route (`POST /api/v1/chat`, sequential; ms):", "",
                  "| route | n | server p50 | server p95 | HTTP p50 | HTTP p95 |", "|---|---|---|---|---|---|"]
        for route, row in routes.items():
            lines.append(f"| {route} | {row['answered_by_route']}/{row['requests']} | {_fmt(row['server_ms']['p50'])} | "
                         f"{_fmt(row['server_ms']['p95'])} | {_fmt(row['http_ms']['p50'])} | "
                         f"{_fmt(row['http_ms']['p95'])} |")

    policies = _get(result, "policies", "all")
    if policies:
        lines += ["", f"Hybrid vs always-LLM vs always-small ({policies['queries']} queries: HINT3 test per bot + "
                  "Bitext test with tau-bench test; LLM latency " + _get(result, "policies", "llm_latency_source")
                  + "):", "",
                  "| policy | mean latency | p95 latency | LLM calls | LLM tokens | cost (USD) | correct KB answer "
                  "(in scope) | out-of-scope answered by small tier |", "|---|---|---|---|---|---|---|---|"]
        for policy in ("hybrid", "always_llm", "always_small"):
            p = policies[policy]
            lines.append(f"| {policy.replace('_', '-')} | {p['latency_mean_ms']:,.0f} ms | {p['latency_p95_ms']:,.0f} ms "
                         f"| {p['llm_calls']} ({p['llm_call_share'] * 100:.0f} %) | {p['llm_tokens']:,} | "
                         f"{p['cost_usd']:.3f} | {_fmt(p['correct_kb_answer_rate'], 'share')} | "
                         f"{p['oos_answered_by_small']} ({_fmt(p['oos_answered_by_small_rate'], 'share')}) |")
        lines.append("")
        lines.append("Quality assumption: " + _get(result, "policies", "quality_assumption"))

    levels = result.get("concurrency") or []
    if levels:
        lines += ["", "Throughput (thread clients, `POST /api/v1/chat`):", "",
                  "| clients | path | req/s | p95 ms | errors | share on path | app RSS MiB |", "|---|---|---|---|---|---|---|"]
        for row in levels:
            lines.append(f"| {row['clients']} | {row['path']} | {_fmt(row['rps'])} | {_fmt(row['p95_ms'])} | "
                         f"{row['errors']} | {_fmt(row['route_share'], 'share')} | {_fmt(row['rss_mib'])} |")
    cuts = []
    routing = result.get("routing") or {}
    if routing.get("stopped_at_budget"):
        cuts.append(f"routing stopped at its time budget after {routing['queries']} of {routing['planned_queries']} "
                    "messages")
    if (result.get("policy_sizes") or {}).get("scaled"):
        cuts.append(f"section 3 samples scaled by {result['policy_sizes']['factor']} to fit the embedding budget "
                    f"({result['policy_sizes']['embed_ms_per_text']} ms per text here)")
    sample = _get(result, "policies", "llm_sample")
    if sample:
        cuts.append(f"LLM latency from {sample['calls'] - sample['failed']} real calls")
    if cuts:
        lines += ["", "Budgets on this run (a busy machine shrinks samples rather than overrun 15 minutes): "
                  + "; ".join(cuts) + "."]
    if result.get("errors"):
        lines += ["", "Sections that failed in this run: " + "; ".join(f"{k}: {v}" for k, v in result["errors"].items())]
    return "\n".join(lines)


def _pair(result: dict, key: str, a: str, b: str, unit: str) -> str:
    return f"{_fmt(_get(result, key, a))} / {_fmt(_get(result, key, b))} {unit}"


def update_readme(readme: Path, section: str) -> None:
    update_readme_section("bench", section, readme)
