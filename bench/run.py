"""`make bench` (`python -m bench.run [--quick]`): every measurement in one run, side by side.

0. encoder backends side by side (torch fp32, ONNX fp32, ONNX int8; micro-batching);  1. routing overhead per
stage, in process, over the demo KB;  2. end-to-end latency per route through a real `tandem serve` wired to a
real `LLMServer` (vLLM), then the vLLM server alone at 1/8/32 streaming clients;  3. hybrid vs always-LLM vs
always-small on HINT3 and Bitext + tau-bench;  4. throughput at 1/8/32/64 clients with the app's memory, then the
same app on torch at 8 clients (served backend / torch), then 2 replicas behind nginx vs 1 on a loopback cluster;
5. cold start;  6. conversation prefix reuse: multi-turn conversations replayed on vLLM with prefix caching on, then
on a second vLLM with it off (bench/prefix_reuse.py; alone: `python -m bench.prefix_reuse --conversations N`);
7. the three caches of issue 42 on one replayed mixed trace, each off and on (bench/mixed_trace.py; alone:
`python -m bench.mixed_trace --sessions N`);  8. the idle-time worker's delay to live traffic that arrives with gaps
(bench/idle_interference.py; alone: `python -m bench.idle_interference --live N`);  9. the handoff: until the
operator's inbox shows it, and the time to the offer of a person with the predicted failure (bench/handoff.py);
10. the product catalog: search and fact answers at 1,000 and 10,000 synthetic products, ingesting 10,000, a price
update seen by two replicas (bench/catalog.py).
Also one pyinstrument profile of the hot path. Writes reports/bench.json, reports/profile.txt and
the README bench section.
Targets are printed next to the measurements, never asserted: a slow run still writes its report.

Sections run one at a time too: ``--sections routing,prefix`` (``make bench SECTIONS="routing prefix"``; ``--list``
names them). A section run updates only its own keys of reports/bench.json and keeps the others; ``sections`` in the
report says when each was last measured, on which machine, and how long it took.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import FULL, QUICK, Clock, app_env, isolate, machine_info, rng
from chains.tiers.base import SMALL_ROUTE

ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _section(result: dict, name: str, clock: Clock, func, *args):
    """Run one section; a failure is recorded with one line and the rest of the bench still runs."""
    log(f"{name} ...")
    began = time.perf_counter()
    try:
        return func(*args)
    except Exception as exc:  # the report must say which part failed and why, not stop the whole run
        result.setdefault("errors", {})[name] = f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:300]}"
        log(f"{name} FAILED: {result['errors'][name]}")
        traceback.print_exc()
        return None
    finally:
        clock.lap(name, began)


def small_path_pool(group, cache_similarity: float) -> list[str]:
    """Bitext test queries the router keeps on the small tier, none closer than the cache threshold to an
    earlier one, so a "small path" request is not silently served by the semantic cache."""
    import numpy as np

    from bench.policies import llm_bound

    chosen: list[str] = []
    vectors: list = []
    for query, record in zip(group.queries, group.records):
        text = " ".join(query.text.split())
        if query.group != "bitext" or record["route"] != SMALL_ROUTE or llm_bound(record):
            continue
        vector = group.chain.embed(text)
        if vectors and float(np.max(np.stack(vectors) @ vector)) >= cache_similarity:
            continue
        chosen.append(text)
        vectors.append(vector)
    return chosen


def spare_questions(sizes) -> list[str]:
    """More fresh FAQ-style messages for the app: Bitext train paraphrases (those left out of a shrunken KB
    first). They are not pre-routed; the throughput table reports the share actually answered by the path."""
    from bench.traffic import limited
    from offline import datasets as ds

    train = ds.bitext("train")
    in_kb = {q.text for q in limited(train, sizes.bitext_kb_questions)}
    ordered = [q for q in train if q.text not in in_kb] + [q for q in train if q.text in in_kb]
    seen: set[str] = set()
    out = []
    for query in ordered:
        key = " ".join(query.text.lower().split())
        if key not in seen:
            seen.add(key)
            out.append(" ".join(query.text.split()))
    rng().shuffle(out)  # the file is grouped by intent; a slice of one intent would be mostly cache hits
    return out


# name: (what it measures, the sections it needs earlier in the same run, the report keys it owns). In the order a
# full run takes them: the LLM-free sections first, before any server competes for the cores.
SECTIONS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "encoders": ("0. encoder backends side by side (torch fp32, ONNX fp32, ONNX int8; micro-batching)", (),
                 ("encoders",)),
    "routing": ("1. routing overhead per stage over the demo KB, and the hot path's profile", (),
                ("routing", "routing_overhead_ms", "profile")),
    "catalog": ("10. the product catalog: search and fact answers at 1,000 and 10,000 products, ingesting 10,000, and a "
                "price update seen by two replicas", (), ("catalog",)),
    "policies": ("3. hybrid vs always-LLM vs always-small on HINT3, Bitext, tau-bench (samples vLLM)", ("routing",),
                 ("policy_sizes", "llm_server_events", "policies", "hybrid_vs_always_llm")),
    "app": ("2, 4, 5. cold start, end-to-end per route, API surfaces, vLLM at 1/8/32 clients, throughput, torch side by "
            "side", ("policies",),
            ("cold_start_s", "rss_after_start_mib", "app_encoder", "end_to_end", "cache_hit_ms", "small_answer_ms",
             "api_surfaces", "llm_levels", "vllm_rss_mib", "concurrency", "concurrency_note", "rss_mib", "rss_peak_mib",
             "torch_side_by_side")),
    "replicas": ("4c. two app replicas behind nginx vs one, and a cache hit across replicas", (), ("replicas",)),
    "prefix": ("6. conversation prefix reuse, prefix caching on and off", (), ("prefix_reuse",)),
    "mixed": ("7. the three caches of issue 42 on one replayed mixed trace, each off and on", (), ("mixed_trace",)),
    "idle": ("8. the idle-time worker's delay to live traffic that arrives with gaps", (), ("idle_interference",)),
    "handoff": ("9. the handoff: until the operator's inbox shows it, and the time to the offer of a person on "
                "out-of-scope messages with the predicted failure", (), ("handoff",)),
}
# The timed steps (Clock laps, and the keys of ``errors``) of each section.
STEPS = {"export": "encoders", "encoders": "encoders", "routing": "routing", "profile": "routing",
         "policies": "policies", "llm_server": "policies", "llm_sample": "policies", "llm_levels": "app",
         "cold_start": "app", "end_to_end": "app", "api_surfaces": "app", "throughput": "app",
         "torch_side_by_side": "app", "replicas": "replicas", "prefix_reuse": "prefix", "mixed_trace": "mixed",
         "idle_interference": "idle", "handoff": "handoff", "catalog": "catalog"}


def chosen_sections(names: list[str]) -> list[str]:
    """The sections to run, in run order: those named and the ones they need (``policies`` needs ``routing``'s
    timings, ``app`` the message pools ``policies`` builds)."""
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown bench section(s): {', '.join(unknown)}. Known: {', '.join(SECTIONS)}")
    wanted: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(SECTIONS[name][1])
    return [name for name in SECTIONS if name in wanted]


def merged(previous: dict, result: dict, ran: list[str]) -> dict:
    """``previous`` report with the keys, timed steps and errors of the sections in ``ran`` replaced by this run's:
    a section run keeps what the others measured, and ``sections`` says when each one was."""
    out = dict(previous)
    for name in ran:
        for key in SECTIONS[name][2]:
            out.pop(key, None)
    for key in ("section_s", "errors"):
        kept = {step: v for step, v in (previous.get(key) or {}).items() if STEPS.get(step) not in ran}
        out[key] = {**kept, **(result.get(key) or {})}
    out.update({k: v for k, v in result.items() if k not in ("section_s", "errors", "sections")})
    # A report written before sections were recorded: its figures carry that run's date.
    dated = {name: {"date": previous.get("date"), "wall_s": None, "quick": bool(previous.get("quick")),
                    "machine": {k: (previous.get("machine") or {}).get(k) for k in ("cores", "cpu", "avx512")}}
             for name, (_, _, keys) in SECTIONS.items() if any(k in previous for k in keys)}
    out["sections"] = {**dated, **(previous.get("sections") or {}), **(result.get("sections") or {})}
    if not out["errors"]:
        out.pop("errors")
    out["quick"] = any(s.get("quick") for s in out["sections"].values())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~6 minute smoke run with small samples")
    parser.add_argument("--sections", default="", help="comma-separated sections to run (default: all; see --list); "
                        "the report keeps the other sections' figures")
    parser.add_argument("--list", action="store_true", help="name the sections and what each measures, and exit")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench.json", help="JSON report path")
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the README bench section")
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary homes and logs")
    args = parser.parse_args(argv)
    if args.list:
        for name, (what, needs, _) in SECTIONS.items():
            print(f"{name:9} {what}" + (f" (runs {', '.join(needs)} first)" if needs else ""))
        return 0
    named = [n for n in args.sections.replace(",", " ").split() if n]
    ran = chosen_sections(named) if named else list(SECTIONS)
    # SIGTERM (a timeout, Ctrl-C in make) must still stop the servers and write what was measured.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = QUICK if args.quick else FULL
    clock = Clock()
    tmp = Path(tempfile.mkdtemp(prefix="tandem-bench-"))

    from tandem.processes import free_port

    llm_port, app_port = free_port(), free_port()
    homes = isolate(tmp, llm_port)
    result: dict = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "quick": args.quick,
                    "machine": machine_info(), "ran": ran, "sections": {}}
    extra = [n for n in ran if named and n not in named]
    log(f"{'quick' if args.quick else 'full'} run of {', '.join(ran)}"
        + (f" ({', '.join(extra)}: needed by the sections named)" if extra else "")
        + f"; temp homes under {tmp}; models from {homes['models']}")
    llm_server = app = None
    try:
        llm_server, app = _run(result, sizes, clock, homes, tmp, llm_port, app_port, ran)
    finally:
        if app is not None:
            app.stop()
        if llm_server is not None:
            llm_server.stop()
        result["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        result["duration_s"] = clock.total
        result["section_s"] = clock.sections
        report = result if ran == list(SECTIONS) else merged(_previous(args.out), result, ran)
        _write(report, args)
        if args.keep_tmp:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    for name, record in result["sections"].items():
        log(f"  {name:9} {record['wall_s']:7.1f} s")
    log(f"done in {clock.total} s ({', '.join(ran)}); report {args.out}")
    return 1 if result.get("errors") else 0


def _previous(path: Path) -> dict:
    """The report a section run merges into (empty when there is none or it does not parse)."""
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return previous if isinstance(previous, dict) else {}


class _Timed:
    """Wall time of one section (its setup included) into ``result["sections"]``, with when and on what host it ran
    (the sizes it ran at are in its own figures: conversations, sessions, live messages ...)."""

    def __init__(self, result: dict, name: str, quick: bool) -> None:
        self.result, self.name, self.quick = result, name, quick

    def __enter__(self) -> None:
        self.began = time.perf_counter()
        self.date = datetime.now(UTC).isoformat(timespec="seconds")
        log(f"section {self.name}: {SECTIONS[self.name][0]}")

    def __exit__(self, *exc: object) -> None:
        machine = self.result["machine"]
        self.result["sections"][self.name] = {
            "date": self.date, "wall_s": round(time.perf_counter() - self.began, 1), "quick": self.quick,
            "machine": {k: machine.get(k) for k in ("cores", "cpu", "avx512")}}


def _run(result: dict, sizes, clock: Clock, homes: dict, tmp: Path, llm_port: int, app_port: int, ran: list[str]):
    from bench import http_load
    from core.settings import get_settings
    from tandem.llm_server import LLMServer

    settings = get_settings()
    quick = bool(result.get("quick"))
    # The ONNX export every later section and the app serve, as on a prepared install (seconds when reused).
    export = _section(result, "export", clock, encoders_export, homes, tmp)
    if export:
        result["encoder_export"] = export
        log(f"  ONNX export {export['how']}: the gate chose {export['chosen']}")
    if "encoders" in ran:
        with _Timed(result, "encoders", quick):
            _encoders(result, sizes, clock, export)
        gc.collect()
    timings = None
    if "routing" in ran:
        with _Timed(result, "routing", quick):
            timings = _routing(result, sizes, clock, settings)
        gc.collect()

    if "catalog" in ran:
        with _Timed(result, "catalog", quick):
            _catalog(result, sizes, clock, settings, export, tmp)
        gc.collect()

    llm_server = app = None
    small_pool: list[str] = []
    llm_pool: list[str] = []
    llm_prompts: Any = None
    if "policies" in ran:
        with _Timed(result, "policies", quick):
            # The LLM server loads (unmeasured) while section 3 builds its knowledge bases.
            llm_server = LLMServer(port=llm_port, log_path=homes["logs"] / "llm-server.log")
            llm_server.start(wait=False)
            small_pool, llm_pool, llm_prompts = _policies(result, sizes, clock, settings, homes, tmp, llm_server,
                                                          timings, "app" in ran)
        gc.collect()
        if "app" not in ran:
            llm_server.stop()

    if "app" in ran and llm_server is not None:
        with _Timed(result, "app", quick):
            # 5. Cold start, then 2. end-to-end per route.
            app = http_load.App(port=app_port, env=app_env(homes), log_path=homes["logs"] / "app.log")
            started = _section(result, "cold_start", clock, app.start)
            traffic = (_end_to_end(result, sizes, clock, app, llm_server, small_pool, llm_pool, settings) if started
                       else None)
            _with_llm(result, sizes, clock, settings, app, llm_server, traffic, llm_pool, llm_prompts)
            llm_server.stop()  # an idle LLM server still holds memory; the throughput levels do not use it
            if traffic is not None:
                small_pool = _throughput(result, sizes, clock, homes, app, traffic)
            app.stop()
        gc.collect()
    if "replicas" in ran:
        with _Timed(result, "replicas", quick):
            _replicas(result, sizes, clock, settings, small_pool)
    _caches(result, sizes, clock, settings, homes, ran)
    if "handoff" in ran:
        from bench import handoff

        with _Timed(result, "handoff", quick):
            measured = _section(result, "handoff", clock, handoff.run, settings, sizes.handoff_sessions,
                                sizes.handoff_messages, sizes.handoff_predict_sample, homes, log)
            if measured:
                result["handoff"] = measured
    return llm_server, app


def _caches(result: dict, sizes, clock: Clock, settings, homes: dict, ran: list[str]) -> None:
    """6-8. Issue 42's caches: conversation prefix reuse (caching on and off), the mixed trace, and the idle-time
    worker's delay to live traffic, on one pair of vLLM servers (caching on and off) started once for the three:
    five starts were about 4 minutes of an AVX2 run. The first section to run pays for the start."""
    from bench import idle_interference, mixed_trace, prefix_reuse

    chosen = [name for name in ("prefix", "mixed", "idle") if name in ran]
    servers: dict[bool, Any] = {}
    try:
        for section in chosen:
            with _Timed(result, section, bool(result.get("quick"))):
                needed = {True} | ({False} if section in ("prefix", "mixed") else set())
                if not needed <= set(servers):
                    began = time.perf_counter()
                    started = _section(result, section_step(section), clock, mixed_trace.start_servers, settings,
                                       homes["logs"], log, needed - set(servers))
                    if started is None:
                        continue
                    servers.update(started)
                    log(f"  vLLM for the cache sections ready after {time.perf_counter() - began:.0f} s")
                if section == "idle" and False in servers:  # the last one needs only caching on; free the memory
                    servers.pop(False).stop()
                name, func, args = {
                    "prefix": ("prefix_reuse", prefix_reuse.run, (sizes.prefix_conversations, log,
                                                                  sizes.prefix_before_conversations, homes["logs"],
                                                                  sizes.prefix_budget_s, servers)),
                    "mixed": ("mixed_trace", mixed_trace.run, (sizes.mixed_sessions, log, 0.3, homes["logs"], None,
                                                               servers)),
                    "idle": ("idle_interference", idle_interference.run, (sizes.idle_live, idle_interference.GAP_S,
                                                                          log, servers))}[section]
                measured = _section(result, name, clock, func, settings, *args)
                if measured:
                    result[name] = measured
    finally:
        for server in servers.values():
            server.stop()


def section_step(section: str) -> str:
    """The timed step (Clock lap) of a cache section."""
    return {"prefix": "prefix_reuse", "mixed": "mixed_trace", "idle": "idle_interference"}[section]


def encoders_export(homes: dict, tmp: Path) -> dict:
    from bench import encoders

    return encoders.ensure_export(homes, tmp / "onnx", log)


def _encoders(result: dict, sizes, clock: Clock, export: dict | None) -> None:
    """0. Encoder backends side by side, on the ONNX export every later section and the app serve."""
    from bench import encoders

    if export:
        backends = _section(result, "encoders", clock, encoders.run_encoders, export, sizes, log)
        if backends:
            result["encoders"] = {**backends, "speedup_vs_torch": encoders.speedups(backends)}


def _routing(result: dict, sizes, clock: Clock, settings) -> dict | None:
    """1. Routing overhead per stage, then the profile, before any server competes for the cores. Returns the
    timings (section 3 compares the policies with them)."""
    from bench import routing
    from chains.bootstrap import bootstrap
    from chains.runtime import build_runtime

    service = _section(result, "routing", clock, lambda: build_runtime(settings, use_llm=False))
    if service is not None:
        for line in bootstrap(settings, service.kb, db=service.db):
            log("  " + line)
    timings = _section(result, "routing", clock, routing.run_routing, service, sizes, log) if service else None
    if timings:
        result["routing"] = {k: v for k, v in timings.items() if not k.startswith("_")}
        result["routing_overhead_ms"] = {k: timings["routing_overhead_ms"][k] for k in ("p50", "p95", "p99")}
        log(f"  routing overhead p50 {timings['routing_overhead_ms']['p50']} ms, "
            f"p95 {timings['routing_overhead_ms']['p95']} ms, p99 {timings['routing_overhead_ms']['p99']} ms")
        profile = _section(result, "profile", clock, routing.run_profile, service, sizes,
                           ROOT / "reports" / "profile.txt", log)
        if profile:
            result["profile"] = profile
    return timings


def _policies(result: dict, sizes, clock: Clock, settings, homes: dict, tmp: Path, llm_server,
              timings: dict | None, for_app: bool = True) -> tuple[list[str], list[str], Any]:
    """3. Hybrid vs always-LLM vs always-small. Returns the app's small-path and LLM-path messages and, when the app
    section runs (``for_app``), the prompts of the LLM levels (section 2), the app's own, built while the Bitext
    chain is at hand."""
    from bench import llm_levels, policies

    fitted = _section(result, "policies", clock, policies.fit_sizes, sizes, log)
    policy_sizes, result["policy_sizes"] = fitted if fitted else (sizes, {})
    groups = _section(result, "policies", clock, policies.build_groups, policy_sizes, tmp / "kbs",
                      homes["app"] / "chroma", log)
    small_pool: list[str] = []
    llm_pool: list[str] = []
    if groups:
        _section(result, "policies", clock, policies.route_groups, groups, log)
        bitext = groups[-1]
        small_pool = small_path_pool(bitext, settings.cache_similarity) + spare_questions(policy_sizes)
        llm_pool = [" ".join(q.text.split()) for q, r in zip(bitext.queries, bitext.records)
                    if r["route"] == "llm" and not r["rewrite"]]
        rng().shuffle(llm_pool)
        log(f"  app traffic: {len(small_pool)} small-path messages, {len(llm_pool)} LLM-path messages")
        ready = _section(result, "llm_server", clock, llm_levels.wait_and_warm, llm_server)
        sampled = _section(result, "llm_sample", clock, policies.sample_llm_calls, groups, sizes.llm_sample_calls,
                           sizes.llm_budget_s, llm_server, log) if ready else None
        calls, result["llm_server_events"] = sampled if sampled else (None, {})
        if calls and timings:
            report = _section(result, "policies", clock, policies.compare, groups, calls, timings["_small_totals"],
                              timings["_pre_llm"], settings.llm_price_per_1k_tokens)
            if report:
                result["policies"] = report
                result["hybrid_vs_always_llm"] = report["all"]["hybrid_vs_always_llm"]
                log(f"  hybrid vs always-LLM: {result['hybrid_vs_always_llm']}")
    llm_prompts = _section(result, "llm_levels", clock, llm_levels.build_prompts, groups[-1] if groups else None,
                           llm_pool, sizes, log) if for_app else None
    return small_pool, llm_pool, llm_prompts


def _with_llm(result: dict, sizes, clock: Clock, settings, app, llm_server, traffic: dict | None,
              llm_pool: list[str], llm_prompts: Any) -> None:
    """The sections that need the LLM server up: 2c and 2b."""
    from bench import api_surfaces

    # 2c. The OpenAI layer's cost on a cache hit, streamed first text against vLLM's own TTFT, the answer check.
    if traffic is not None and llm_server.alive():
        surfaces = _section(result, "api_surfaces", clock, api_surfaces.run, app.url, llm_server.url,
                            traffic["cache"], llm_pool[:12], api_surfaces.demo_answers(), sizes.llm_budget_s / 4, log)
        if surfaces:
            result["api_surfaces"] = surfaces
            log(f"  api surfaces: {surfaces}")

    # 2b. The vLLM server alone at 1/8/32 streaming clients, while it is up.
    if llm_prompts:
        levels_llm = _section(result, "llm_levels", clock, _llm_levels, llm_server, llm_prompts, sizes,
                              settings.llm_max_tokens)
        if levels_llm:
            result["llm_levels"] = levels_llm
            result["vllm_rss_mib"] = levels_llm["memory"]["peak_rss_mib"]


def _throughput(result: dict, sizes, clock: Clock, homes: dict, app, traffic: dict) -> list[str]:
    """4. Throughput and memory on the started app, which it stops; then 4b, the same on torch. Returns the
    fresh small-path messages left."""
    from bench import http_load, side_by_side
    from tandem.processes import free_port

    levels = _section(result, "throughput", clock, http_load.throughput, app, traffic["small_pool"],
                      traffic["cache"], sizes, log)
    if levels:
        result["concurrency"] = levels
        result["concurrency_note"] = (f"thread clients in the bench process, one connection each, "
                                      f"{sizes.level_seconds:.0f} s per level or until the level's slice of "
                                      "fresh small-path messages ran out")
    result["rss_mib"] = round(max(app.rss_samples_mib), 1) if app.rss_samples_mib else None
    result["rss_peak_mib"] = app.rss_mib().get("peak_rss_mib")
    app.stop()

    # 4b. The same app on torch fp32 (same home, KB and messages), shorter: served backend / torch.
    side = _section(result, "torch_side_by_side", clock, side_by_side.torch_run, free_port(), app_env(homes),
                    homes["logs"] / "app-torch.log", traffic["per_route_small"], traffic["cache"],
                    side_by_side.level_slice(traffic["small_pool"], sizes.levels, sizes.side_clients), sizes, log)
    if side:
        result["torch_side_by_side"] = {
            **side, "served_backend": _backend_name((result.get("app_encoder") or {}).get("backend")),
            "clients": sizes.side_clients, "ratios": side_by_side.ratios(result, side, sizes.side_clients)}
        log(f"  served / torch: {result['torch_side_by_side']['ratios']}")
    return traffic["small_pool"]


def _replicas(result: dict, sizes, clock: Clock, settings, small_pool: list[str]) -> None:
    """4c. Two replicas behind nginx vs one, and a cache hit across replicas, on a loopback cluster (its KB and
    cache are its own, so every bench message is fresh there)."""
    from bench import replicas

    pool = small_pool[::-1] or spare_questions(sizes)
    cluster = _section(result, "replicas", clock, replicas.run_replicas, settings, pool,
                       (result.get("encoder_export") or {}).get("folder"), sizes, log)
    if cluster:
        result["replicas"] = cluster


def _catalog(result: dict, sizes, clock: Clock, settings, export: dict | None, tmp: Path) -> None:
    """9. The catalog (issue 59): answers at 1,000 and 10,000 synthetic products, the 10,000-product ingest, and a
    price update on two replicas (bench/catalog.py)."""
    from bench import catalog

    measured = _section(result, "catalog", clock, catalog.run, sizes, (export or {}).get("folder"), settings, log, tmp)
    if measured:
        result["catalog"] = measured


def _end_to_end(result: dict, sizes, clock: Clock, app, llm_server, small_pool: list[str], llm_pool: list[str],
                settings) -> dict:
    """Section 2 on the started app; returns the traffic the later app sections use."""
    from bench import http_load
    from bench.llm_levels import restart_llm

    result["cold_start_s"] = app.cold_start_s
    result["rss_after_start_mib"] = app.rss_mib()
    result["app_encoder"] = http_load.served_encoder(app.url)
    log(f"  cold start {app.cold_start_s} s, rss {result['rss_after_start_mib']}, encoder "
        f"{(result['app_encoder'] or {}).get('backend')}")
    warm_n = min(24, len(small_pool))
    candidates, small_pool = small_pool[:warm_n], small_pool[warm_n:]
    per_route_small, small_pool = small_pool[:sizes.http_per_route], small_pool[sizes.http_per_route:]
    cache_warm = _section(result, "end_to_end", clock, http_load.cacheable_set, app,
                          candidates or ["How do I return an item?"]) or []
    if not llm_server.alive():
        result.setdefault("llm_server_events", {}).setdefault("stopped_before_end_to_end", True)
        _section(result, "end_to_end", clock, lambda server: restart_llm(server, log), llm_server)
    e2e = _section(result, "end_to_end", clock, http_load.per_route, app, per_route_small,
                   cache_warm or candidates, llm_pool[:sizes.http_llm_calls], sizes, log)
    if e2e:
        result["end_to_end"] = {"routes": e2e, "kb": "Bitext (kb_answers + train questions)",
                                "cache_messages": len(cache_warm),
                                "llm": f"{_engine_label(llm_server)} on CPU, max_tokens {settings.llm_max_tokens}"}
        result["cache_hit_ms"] = {"p50": e2e["cache"]["server_ms"]["p50"], "p50_http": e2e["cache"]["http_ms"]["p50"]}
        result["small_answer_ms"] = {"p50": e2e[SMALL_ROUTE]["server_ms"]["p50"],
                                     "p50_http": e2e[SMALL_ROUTE]["http_ms"]["p50"]}
    return {"per_route_small": per_route_small, "cache": cache_warm or candidates, "small_pool": small_pool}


def _backend_name(backend: str | None) -> str | None:
    """The app's backend name ("onnx") as the encoder section names it ("onnx-fp32")."""
    from bench.encoders import CHOSEN

    return CHOSEN.get(backend or "", backend)


def _engine_label(server) -> str:
    """"vLLM <version> serving <model>" from the server itself (GET /version, /v1/models), else what it was given."""
    from bench.llm_levels import engine
    from core.settings import get_settings

    try:
        info = engine(server.url, {"Authorization": f"Bearer {get_settings().llm_api_key}"})
        return f"{info['engine']} serving {info['model']}"
    except Exception:  # a label only: the measurements report the server's failures themselves
        return f"vLLM serving {server.model}"


def _llm_levels(server, prompts, sizes, max_tokens: int) -> dict:
    from bench.llm_levels import restart_llm, run_levels

    if not server.alive():
        restart_llm(server, log)
    server.wait_ready(timeout=300)
    return run_levels(server, prompts, sizes, max_tokens, log)


def _write(result: dict, args) -> None:
    from bench.report import markdown, targets, update_readme

    result["targets"] = targets(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".json.tmp")
    partial.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    partial.replace(args.out)
    for row in result["targets"]:
        flag = {True: "ok  ", False: "MISS", None: "n/a "}[row["met"]]
        log(f"  [{flag}] {row['metric']:34} measured {row['measured']} {row['unit']} (target {row['target']})")
    readme = ROOT / "README.md"
    # Only where the README keeps a bench section: the short README links the generated docs page instead.
    if not args.no_readme and "<!-- bench:start -->" in readme.read_text(encoding="utf-8"):
        update_readme(readme, markdown(result))


if __name__ == "__main__":
    sys.exit(main())
