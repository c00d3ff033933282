"""Targets next to measured values (never asserted), and the dated markdown section of README.md."""

from __future__ import annotations

from pathlib import Path

from chains.tiers.base import SMALL_ROUTE
from offline.readme import update_readme_section


def _get(data: dict, *path):
    for key in path:
        if not isinstance(data, dict) or data.get(key) is None:
            return None
        data = data[key]
    return data


def _level(result: dict, clients: int, path: str) -> dict:
    return next((c for c in result.get("concurrency") or [] if c.get("clients") == clients and c.get("path") == path),
                {})


def targets(result: dict) -> list[dict]:
    """Each target with its measured value and whether it was met (None when not measured)."""
    level64 = [c for c in result.get("concurrency", []) if c.get("clients") == 64]
    errors64 = sum(c["errors"] for c in level64) if level64 else None
    served = _get(result, "encoders", "served")
    llm = {row["clients"]: row for row in _get(result, "llm_levels", "levels") or []}
    rows = [
        ("routing overhead p50", "<= 5 ms", _get(result, "routing_overhead_ms", "p50"), "ms", lambda v: v <= 5),
        ("cache hit p50 (server)", "<= 1.5 ms", _get(result, "cache_hit_ms", "p50"), "ms", lambda v: v <= 1.5),
        ("small answer p50 (server)", "<= 12 ms", _get(result, "small_answer_ms", "p50"), "ms", lambda v: v <= 12),
        ("small path at 8 clients", ">= 70 req/s", _level(result, 8, SMALL_ROUTE).get("rps"), "req/s",
         lambda v: v >= 70),
        ("cache path at 8 clients", ">= 300 req/s", _level(result, 8, "cache").get("rps"), "req/s",
         lambda v: v >= 300),
        ("2 replicas / 1 replica (64 clients)", ">= 1.6", _get(result, "replicas", "ratio"), "x", lambda v: v >= 1.6),
        ("cross-replica cache hit p50 (server)", "<= 5 ms",
         _get(result, "replicas", "cross_replica_cache", "hit_server_ms", "p50"), "ms", lambda v: v <= 5),
        ("micro-batching overhead alone, p50", "<= 1 ms",
         _get(result, "encoders", "micro_batching", served, "single_overhead_p50_ms") if served else None, "ms",
         lambda v: v <= 1),
        ("vLLM server memory (RSS, with children)", "<= 3 GiB", result.get("vllm_rss_mib"), "MiB",
         lambda v: v <= 3072),
        ("hybrid mean latency / always-LLM", "<= 0.35", _get(result, "hybrid_vs_always_llm", "latency_mean_ratio"),
         "x", lambda v: v <= 0.35),
        ("LLM call share (hybrid)", "<= 50 %", _get(result, "hybrid_vs_always_llm", "llm_call_share"), "share",
         lambda v: v <= 0.5),
        ("errors at 64 clients", "0", errors64, "count", lambda v: v == 0),
        ("app RSS", "<= 1.5 GiB", result.get("rss_mib"), "MiB", lambda v: v <= 1536),
        ("vLLM p50, 1 client (48-token answers)", "<= 0.6 s", (llm.get(1) or {}).get("p50_ms"), "ms",
         lambda v: v <= 600),
        ("vLLM at 8 clients", ">= 100 tokens/s", (llm.get(8) or {}).get("tokens_per_s"), "tokens/s",
         lambda v: v >= 100),
        ("OpenAI layer overhead on a cache hit, p50", "<= 1 ms",
         _get(result, "api_surfaces", "openai_cache_hit", "overhead_p50_ms"), "ms", lambda v: v <= 1),
        # Issue 39: an LLM answer is held until it has passed its checks (TANDEM_LLM_HOLD_UNTIL_CHECKED), so the
        # customer's first text is the checked answer, not the engine's first token.
        ("streamed first text of an LLM answer, p50, 1 client", "<= 1.5 s",
         _get(result, "api_surfaces", "streaming", "first_text_p50_ms"), "ms", lambda v: v <= 1500),
        ("streamed first text - vLLM's own TTFT, p50", "<= 50 ms",
         _get(result, "api_surfaces", "streaming", "gap_p50_ms"), "ms", lambda v: v <= 50),
        ("answer check, ~100-token answer, p50", "<= 5 ms", _get(result, "api_surfaces", "answer_check", "p50_ms"),
         "ms", lambda v: v <= 5),
        # Issue 57: the handoff reaches the operators' inbox, and the offer of a person costs no LLM wait.
        ("handoff until the agent inbox lists it, p95", "<= 5 s",
         _get(result, "handoff", "to_inbox", "shown_after_s", "p95"), "s", lambda v: v <= 5),
        ("time to the offer of a person, out of scope, records filled, p50", "<= 2 s",
         _get(result, "handoff", "to_offer", "after_records", "time_to_offer_s", "p50"), "s", lambda v: v <= 2),
    ]
    catalog = result.get("catalog") or {}
    for size in ("1000", "10000"):
        for kind in ("search", "fact"):
            rows.append((f"catalog {kind} answer p50, {int(size):,} products", "<= 30 ms",
                         _get(catalog, "at", size, kind, "p50"), "ms", lambda v: v <= 30))
    rows.append(("catalog ingest, 10,000 products", "<= 120 s", _get(catalog, "at", "10000", "ingest_s"), "s",
                 lambda v: v <= 120))
    rows.append(("catalog price update seen on every replica (max)", "<= 2 s",
                 _get(catalog, "price_update", "max_s"), "s", lambda v: v <= 2))
    mixed = [{"metric": f"mixed trace: {t['metric']}", "target": t["target"], "measured": t["measured"],
              "unit": "x" if t["target"].startswith("<=") else "count", "met": t["met"]}
             for section in ("mixed_trace", "idle_interference")  # issue 42 (bench/mixed_trace.py, idle_interference.py)
             for t in _get(result, section, "targets") or []]
    return [{"metric": name, "target": target, "measured": value, "unit": unit,
             "met": None if value is None else bool(check(value))} for name, target, value, unit, check in rows] + mixed


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
    """The README's bench section: the targets, then one table per bench section, then what was cut or failed."""
    lines = _summary_lines(result)
    lines += _route_lines(result)
    lines += _encoder_lines(result)
    lines += _side_by_side_lines(result)
    lines += _llm_lines(result)
    lines += _policy_lines(result)
    lines += _throughput_lines(result)
    lines += _replica_lines(result)
    lines += _prefix_lines(result)
    lines += _mixed_lines(result)
    lines += _handoff_lines(result)
    lines += _catalog_lines(result)
    lines += _budget_lines(result)
    return "\n".join(lines)


def _section_lines(result: dict) -> list[str]:
    """When and where each section was last measured: `make bench SECTIONS=...` reruns some and keeps the others."""
    sections = result.get("sections") or {}
    if not sections:
        return []
    lines = ["| section | measured | wall time | host | run |", "|---|---|---|---|---|"]
    for name, s in sections.items():
        host = s.get("machine") or {}
        kind = {True: "AVX-512", False: "AVX2", None: "?"}[host.get("avx512")]
        lines.append(f"| {name} | {s.get('date')} | {_fmt(s.get('wall_s'), 's')} | {host.get('cores')} cores, {kind} | "
                     f"{'quick' if s.get('quick') else 'full'} |")
    return [*lines, ""]


def _summary_lines(result: dict) -> list[str]:
    m = result.get("machine", {})
    lines = [
        f"Last run: **{result.get('date')}** ({'quick smoke run' if result.get('quick') else 'full run'}"
        + (f" of {', '.join(result['ran'])}" if result.get("ran") else "") + f", {result.get('duration_s')} s). "
        f"Machine: {m.get('cores')} cores, {m.get('cpu')}, {m.get('ram_gib')} GiB RAM, "
        f"Python {m.get('python')}, torch {m.get('torch')}; load average at start {m.get('loadavg_start')} "
        "(shared machine: absolute numbers are noisy). Raw figures: `reports/bench.json`; profile: "
        "`reports/profile.txt`.",
        "",
        *_section_lines(result),
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
    side = result.get("torch_side_by_side") or {}
    if side:
        backend = side.get("served_backend") or "served"
        extra += [
            (f"{backend} / torch: small path req/s at {side.get('clients')} clients",
             _fmt(_get(side, "ratios", "small_rps"), "x")),
            (f"{backend} / torch: small answer p50 (server)", _fmt(_get(side, "ratios", "small_p50_server_ms"), "x")),
        ]
    return lines + [f"| {name} | {value} | | |" for name, value in extra]


def _route_lines(result: dict) -> list[str]:
    routes = _get(result, "end_to_end", "routes") or {}
    if not routes:
        return []
    lines = ["", "End-to-end latency per route (`POST /api/v1/chat`, sequential; ms):", "",
             "| route | n | server p50 | server p95 | HTTP p50 | HTTP p95 |", "|---|---|---|---|---|---|"]
    for route, row in routes.items():
        lines.append(f"| {route} | {row['answered_by_route']}/{row['requests']} | {_fmt(row['server_ms']['p50'])} | "
                     f"{_fmt(row['server_ms']['p95'])} | {_fmt(row['http_ms']['p50'])} | "
                     f"{_fmt(row['http_ms']['p95'])} |")
    return lines


def _policy_lines(result: dict) -> list[str]:
    policies = _get(result, "policies", "all")
    if not policies:
        return []
    lines = ["", f"Hybrid vs always-LLM vs always-small ({policies['queries']} queries: HINT3 test per bot + "
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
    return lines


def _throughput_lines(result: dict) -> list[str]:
    levels = result.get("concurrency") or []
    if not levels:
        return []
    lines = ["", "Throughput (thread clients, `POST /api/v1/chat`):", "",
             "| clients | path | req/s | p95 ms | errors | share on path | app RSS MiB |", "|---|---|---|---|---|---|---|"]
    for row in levels:
        lines.append(f"| {row['clients']} | {row['path']} | {_fmt(row['rps'])} | {_fmt(row['p95_ms'])} | "
                     f"{row['errors']} | {_fmt(row['route_share'], 'share')} | {_fmt(row['rss_mib'])} |")
    return lines


def _budget_lines(result: dict) -> list[str]:
    """What this run cut to fit its time budget, and the sections that failed."""
    lines: list[str] = []
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
    return lines


def _encoder_lines(result: dict) -> list[str]:
    enc = result.get("encoders") or {}
    rows = enc.get("backends") or {}
    if not rows:
        return []
    export = result.get("encoder_export") or {}
    gate = export.get("gate") or {}
    lines = ["", f"Encoder backends of the base MiniLM, same texts ({enc['single_messages']} messages one at a time, "
             f"{enc['batch_messages']} in batches of 32; agreement on the {enc['agreement_questions']} demo KB "
             f"questions). Served: **{enc.get('served')}** (the ONNX export's gate: int8 top-1 agreement "
             f"{gate.get('int8_top1_agreement')}, needs {gate.get('gate')}; {export.get('how')}). Texts: "
             f"{enc.get('texts')}.", "",
             "| backend | single p50 ms | single p95 ms | batch-32 msg/s | mean cosine vs torch | top-1 vs torch |",
             "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {_fmt(row['single_ms']['p50'])} | {_fmt(row['single_ms']['p95'])} | "
                     f"{_fmt(row['batch32_messages_per_s'])} | {row['mean_cosine_vs_torch']:.4f} | "
                     f"{_fmt(row['top1_agreement_vs_torch'], 'share')} |")
    batching = enc.get("micro_batching") or {}
    if batching:
        lines += ["", "Micro-batching (`BatchingEncoder`) vs the plain encoder, one message per call from each thread "
                  "(msg/s on the mixed texts, whose long tau-bench instructions pad every batch they are in, and on "
                  "short Bitext messages only), and alone (single-message p50):", "",
                  "| backend | threads | plain msg/s | micro-batched msg/s | mean batch | short only: plain / "
                  "micro-batched msg/s | alone: p50 plain / micro-batched |", "|---|---|---|---|---|---|---|"]
        for name, row in batching.items():
            single = row["single_p50_ms"]
            short = row.get("short_texts") or {}
            lines.append(f"| {name} | {row['threads']} | {_fmt(row['plain']['messages_per_s'])} | "
                         f"{_fmt(row['batching']['messages_per_s'])} | {row['batching']['mean_batch']} | "
                         f"{_fmt(short.get('plain_messages_per_s'))} / {_fmt(short.get('batching_messages_per_s'))} | "
                         f"{_fmt(single['plain'])} / {_fmt(single['batching'])} ms |")
    return lines


def _side_by_side_lines(result: dict) -> list[str]:
    side = result.get("torch_side_by_side") or {}
    if not side.get("small_level"):
        return []
    clients = int(side.get("clients") or 8)
    backend = side.get("served_backend") or "served"
    served_small = _get(result, "end_to_end", "routes", SMALL_ROUTE, "server_ms", "p50")
    rows = [(f"small path, {clients} clients (req/s)", _level(result, clients, SMALL_ROUTE).get("rps"),
             side["small_level"].get("rps"), _get(side, "ratios", "small_rps")),
            (f"cache path, {clients} clients (req/s)", _level(result, clients, "cache").get("rps"),
             _get(side, "cache_level", "rps"), _get(side, "ratios", "cache_rps")),
            ("small answer p50, server (ms)", served_small, _get(side, SMALL_ROUTE, "server_ms", "p50"),
             _get(side, "ratios", "small_p50_server_ms"))]
    lines = ["", f"The app on its served encoder ({backend}) and again with `TANDEM_ENCODER_BACKEND=torch` (same home, "
             "KB and messages):", "", f"| measure | {backend} | torch | {backend} / torch |", "|---|---|---|---|"]
    lines += [f"| {name} | {_fmt(a)} | {_fmt(b)} | {_fmt(r, 'x')} |" for name, a, b, r in rows]
    return lines


def _llm_lines(result: dict) -> list[str]:
    from bench.llm_levels import TRANSFORMERS_NOTE

    llm = result.get("llm_levels") or {}
    lines = []
    if llm.get("levels"):
        memory = llm.get("memory") or {}
        lines += ["", f"LLM server alone: **{llm.get('engine')}** serving `{llm.get('model')}` on CPU, streaming chat "
                  f"completions with the app's prompts ({llm.get('prompts')} customer questions), max_tokens "
                  f"{llm.get('max_tokens')}, {llm.get('level_seconds'):.0f} s per level; server memory peak "
                  f"{_fmt(memory.get('peak_rss_mib'), 'MiB')} RSS with children (PSS "
                  f"{_fmt(memory.get('peak_pss_mib'), 'MiB')}):", "",
                  "| clients | requests | p50 ms | p95 ms | TTFT p50 ms | completion tokens/s | errors |",
                  "|---|---|---|---|---|---|---|"]
        for row in llm["levels"]:
            lines.append(f"| {row['clients']} | {row['requests']} | {_fmt(row['p50_ms'])} | {_fmt(row['p95_ms'])} | "
                         f"{_fmt(row['ttft_p50_ms'])} | {_fmt(row['tokens_per_s'])} | {row['errors']} |")
    return lines + ["", TRANSFORMERS_NOTE]


def _replica_lines(result: dict) -> list[str]:
    rep = result.get("replicas") or {}
    if not rep.get("balanced"):
        return []
    lines = ["", f"Replicas (loopback cluster: Redis, PostgreSQL, Chroma server, nginx; {rep['kb']}; no LLM, so "
             f"LLM-bound messages fall back to the small tier), {rep['clients']} clients, fresh small-path messages, "
             f"{rep['seconds']:.0f} s each; encoder {(rep.get('encoder') or {}).get('backend')}:", "",
             "| setup | req/s | on the small route | of those, LLM fallbacks | p95 ms | errors |",
             "|---|---|---|---|---|---|"]
    for name, label in (("balanced", "2 replicas behind nginx"), ("single", "1 replica, direct")):
        row = rep[name]
        lines.append(f"| {label} | {_fmt(row['rps'])} | {_fmt(row['small_share'], 'share')} | "
                     f"{row.get('llm_fallbacks', 'n/a')} of {row['requests']} | {_fmt(row['p95_ms'])} | "
                     f"{row['errors']} |")
    cross = rep.get("cross_replica_cache") or {}
    if cross:
        lines += ["", f"Cross-replica cache: a message the small tier answered on replica 1, asked again on replica "
                  f"2: {cross['hits']} of {cross['pairs']} were cache hits there, server p50 "
                  f"{_fmt(_get(cross, 'hit_server_ms', 'p50'), 'ms')} (HTTP p50 "
                  f"{_fmt(_get(cross, 'hit_http_ms', 'p50'), 'ms')}); {cross.get('skipped_not_cacheable', 'n/a')} "
                  "messages were skipped because their first answer was not the small tier's (e.g. an LLM "
                  "fallback, which is never cached)."]
    return lines


def _prefix_lines(result: dict) -> list[str]:
    from bench.prefix_reuse import table

    return ["", *table(result["prefix_reuse"])] if result.get("prefix_reuse") else []


def _mixed_lines(result: dict) -> list[str]:
    from bench import idle_interference, mixed_trace

    return ((["", *mixed_trace.table(result["mixed_trace"])] if result.get("mixed_trace") else [])
            + (["", *idle_interference.table(result["idle_interference"])] if result.get("idle_interference") else []))


def _handoff_lines(result: dict) -> list[str]:
    from bench.handoff import table

    return ["", *table(result["handoff"])] if result.get("handoff") else []
def _catalog_lines(result: dict) -> list[str]:
    """Section 9 (bench/catalog.py): the catalog tier's answers per catalog size, the ingest, the replicas."""
    catalog = result.get("catalog") or {}
    failed = ["", "Catalog parts that failed in this run: " + "; ".join(f"{k}: {v}" for k, v in catalog["errors"].items())
              ] if catalog.get("errors") else []
    if not catalog.get("at"):
        return failed
    lines = ["", "Product catalog (synthetic Merchant Center feeds varied from the demo catalog; the catalog tier's "
             "claim and answer as the chain runs them, distinct messages; `tandem catalog ingest --no-images` in its "
             f"own process, {catalog.get('cores')} cores):", "",
             "| products | search p50 / p95 ms | fact p50 / p95 ms | ingest s (CPU s) | embedded | search p50 target | "
             "ingest target |", "|---|---|---|---|---|---|---|"]
    for size, row in catalog["at"].items():
        search, fact = row.get("search") or {}, row.get("fact") or {}
        met = "met" if all((r.get("p50") or 1e9) <= 30 for r in (search, fact)) else "**missed**"
        ingest = row.get("ingest_s")
        ingest_met = ("met" if ingest is not None and ingest <= 120 else "**missed**") if size == "10000" else "-"
        lines.append(f"| {int(size):,} | {_fmt(search.get('p50'))} / {_fmt(search.get('p95'))} | "
                     f"{_fmt(fact.get('p50'))} / {_fmt(fact.get('p95'))} | {_fmt(ingest)} "
                     f"({_fmt((row.get('ingest') or {}).get('cpu_s'))} CPU) | "
                     f"{(row.get('ingest') or {}).get('embedded', 'n/a')} | {met} (<= 30 ms) | {ingest_met} |")
    render = catalog.get("render_pictures") or {}
    if render:
        lines += ["", f"Pictures and barcode images (left out of the ingest time above): "
                  f"{_fmt(render.get('ms_per_product'), 'ms')} per product ({render.get('products')} products)."]
    update = catalog.get("price_update") or {}
    if update.get("trials"):
        verdict = ("met" if update.get("max_s") is not None and update["max_s"] <= 2 else "**missed**")
        lines += ["", f"A price update seen on every replica ({update.get('replicas')} `tandem serve` replicas, "
                  f"{update.get('database')}, {update.get('chroma')}; `tandem catalog ingest` of the changed feed "
                  f"while each replica is asked \"{update.get('question')}\"): max "
                  f"{_fmt(update.get('max_s'), 's')}, p50 {_fmt(update.get('p50_s'), 's')} over "
                  f"{len(update['trials'])} updates, never seen {update.get('never_seen')}; target <= 2 s: "
                  f"{verdict}."]
    return lines + failed


def _pair(result: dict, key: str, a: str, b: str, unit: str) -> str:
    return f"{_fmt(_get(result, key, a))} / {_fmt(_get(result, key, b))} {unit}"


def update_readme(readme: Path, section: str) -> None:
    update_readme_section("bench", section, readme)
