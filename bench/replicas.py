"""Replicas: small-path throughput at 64 clients through nginx with 2 app replicas vs one replica directly, and a
cross-replica cache hit, on a real loopback cluster (tandem/cluster.py: Redis, PostgreSQL, Chroma's server, two
`tandem serve` replicas behind nginx; no LLM server, no console).

Every request carries its own user id and session id (the cluster limits messages per user and per session), and
the balancer's route cookie is dropped after each request, so requests spread over the replicas as API callers'
do. The messages are fresh bench messages (no cache hits from earlier levels); the share actually answered on the
small route is reported next to the rate, with how many of those were LLM-bound messages that fell back.

There is no LLM server, so the replicas are told not to retry it (``TANDEM_LLM_RETRIES=0``) and to keep the
breaker open once it opened (``TANDEM_BREAKER_COOLDOWN_S``): otherwise the run measured first would pay the retry
back-off of every LLM-bound message until each replica's breaker opened, and the runs would not be comparable.
A warm-up on each replica opens its breaker and pays the lazy loads before anything is measured.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.common import closed_loop, mean, pct
from bench.http_load import served_encoder
from chains.tiers.base import SMALL_ROUTE

CHAT = "/api/v1/chat"
WARM_UP = 16  # messages per replica before anything is measured


def chat(client: httpx.Client, url: str, message: str, ident: str) -> dict:
    started = time.perf_counter()
    try:
        reply = client.post(url + CHAT, json={"message": message, "user_id": f"u-{ident}",
                                              "session_id": f"s-{ident}"})
        elapsed = (time.perf_counter() - started) * 1000
        body = reply.json() if reply.headers.get("content-type", "").startswith("application/json") else {}
        client.cookies.clear()  # no sticky route: spread like API callers
        return {"status": reply.status_code, "client_ms": elapsed, "route": body.get("route"),
                "server_ms": (body.get("latency_ms") or {}).get("total"), "stages": body.get("latency_ms") or {},
                "fallback": bool(body.get("fallback")), "degraded": bool(body.get("degraded"))}
    except httpx.HTTPError as exc:
        return {"status": 0, "client_ms": (time.perf_counter() - started) * 1000, "route": None, "server_ms": None,
                "error": f"{exc.__class__.__name__}: {exc}"[:200]}


def load(url: str, clients: int, seconds: float, messages: list[str], tag: str) -> dict:
    """`clients` threads posting fresh messages back to back for `seconds` (or until the messages run out)."""
    supply = iter(messages)
    ids = itertools.count()
    ran_out = [False]

    def next_message() -> tuple[str, int] | None:
        message = next(supply, None)
        if message is None:
            ran_out[0] = True
            return None
        return message, next(ids)

    rows, elapsed = closed_loop(clients, seconds, next_message,
                                lambda client, job: chat(client, url, job[0], f"{tag}-{job[1]}"), {"timeout": 60.0})
    ok = [r for r in rows if r["status"] == 200]
    small = [r for r in ok if r["route"] == SMALL_ROUTE]
    planned_small = [r for r in small if not (r.get("fallback") or r.get("degraded"))]  # routed small, no LLM
    routes: dict[str, int] = {}
    for row in rows:
        routes[row["route"] or "error"] = routes.get(row["route"] or "error", 0) + 1
    return {"url": url, "clients": clients, "requests": len(rows), "seconds": round(elapsed, 2),
            "rps": round(len(rows) / elapsed, 2) if elapsed else None,
            "small_rps": round(len(small) / elapsed, 2) if elapsed else None,
            "small_share": round(len(small) / max(len(rows), 1), 4),
            "small_share_not_fallback": round(len(planned_small) / max(len(rows), 1), 4), "routes": routes,
            "llm_fallbacks": sum(r.get("fallback", False) for r in rows),
            "degraded": sum(r.get("degraded", False) for r in rows),
            "p50_ms": pct((r["client_ms"] for r in ok), 50)["p50"], "p95_ms": pct((r["client_ms"] for r in ok), 95)["p95"],
            "small_server_p50_ms": pct((r["server_ms"] for r in small), 50)["p50"],
            "errors": len(rows) - len(ok), "ran_out_of_messages": ran_out[0],
            "error_examples": sorted({r.get("error") or str(r["status"]) for r in rows if r["status"] != 200})[:3]}


def cross_replica(first: str, second: str, messages: list[str], pairs: int) -> dict:
    """Ask a message on replica 1; when the small tier answered it (an answer that can be cached: not an LLM
    fallback), ask the same message on replica 2, whose answer should be a hit in the shared (Redis) cache. Until
    `pairs` messages were asked on both replicas. Server-side totals of the hits."""
    rows: list[tuple[dict, dict]] = []
    first_routes: dict[str, int] = {}
    skipped = 0
    with httpx.Client(timeout=60.0) as client:
        for index, message in enumerate(messages):
            if len(rows) >= pairs:
                break
            asked = chat(client, first, message, f"x{index}-a")
            first_routes[asked["route"] or "error"] = first_routes.get(asked["route"] or "error", 0) + 1
            if asked["route"] != SMALL_ROUTE or asked.get("fallback") or asked.get("degraded"):
                skipped += 1
                continue
            rows.append((asked, chat(client, second, message, f"x{index}-b")))
    hits = [again for _, again in rows if again["route"] == "cache"]
    return {"pairs": len(rows), "hits": len(hits), "first_routes": first_routes,
            "skipped_not_cacheable": skipped,
            "hit_server_ms": {**pct((r["server_ms"] for r in hits), 50, 95), "mean": mean(r["server_ms"] for r in hits)},
            "hit_http_ms": pct((r["client_ms"] for r in hits), 50, 95),
            "hit_stages_p50_ms": {stage: pct(r["stages"].get(stage) for r in hits)["p50"]
                                  for stage in sorted({k for r in hits for k in r["stages"]})},
            "second_routes": sorted({again["route"] or "error" for _, again in rows}),
            "note": "messages whose first answer was not the small tier's (LLM fallback, cache, tool) are skipped: "
                    "such answers are not cached; a pair that is still no hit had an answer with personal data"}


def run_replicas(settings, pool: list[str], export_folder: str | None, sizes, log: Callable[[str], None]) -> dict:
    """Start the cluster (2 replicas), measure, and stop it (always)."""
    from core.encoders import export_dir
    from core.model_files import minilm_path
    from tandem.cluster import Cluster, ClusterPorts
    from tandem.processes import free_port, two_free_ports

    pairs = sizes.cross_replica_pairs
    reserved = 4 * pairs + 2 * WARM_UP  # cross-replica candidates (some are skipped) and the warm-up
    per_run = (len(pool) - reserved) // 2
    if per_run < sizes.replica_clients:
        raise RuntimeError(f"only {len(pool)} fresh messages for the replica runs")
    warm_msgs, cross_msgs = pool[:2 * WARM_UP], pool[2 * WARM_UP:reserved]
    balanced_msgs, direct_msgs = pool[reserved:reserved + per_run], pool[reserved + per_run:]
    # Not under the bench's temp dir: that is private to root, and PostgreSQL runs as user postgres.
    home = Path(tempfile.mkdtemp(prefix="tandem-bench-cluster-"))
    os.chmod(home, 0o755)
    if export_folder:  # the replicas serve the same encoder backend as the single app
        from bench.encoders import link_export

        link_export(Path(export_folder), export_dir(minilm_path(), home))
    ports = ClusterPorts(balancer=free_port(), first_replica=two_free_ports(), console=free_port(),
                         redis=free_port(), postgres=free_port(), chroma=free_port())
    cluster = Cluster(settings.model_copy(update={"home": home}), replicas=2, ports=ports, with_llm=False,
                      with_console=False, log=lambda line: log("  " + line),
                      extra_env={"TANDEM_OPS_EVERY_MIN": "0", "TANDEM_LLM_RETRIES": "0",
                                 "TANDEM_BREAKER_COOLDOWN_S": "3600"})
    out: dict = {"replicas": 2, "kb": "demo KB (`tandem init` on the cluster)",
                 "llm": "none: LLM-bound messages fall back to the small tier (no retries, breaker kept open)",
                 "clients": sizes.replica_clients, "seconds": sizes.replica_seconds}
    began = time.perf_counter()
    try:
        cluster.start()
        out["start_s"] = round(time.perf_counter() - began, 1)
        out["encoder"] = served_encoder(cluster.replica_url(0))
        log(f"  cluster up in {out['start_s']} s (replicas {cluster.replica_url(0)}, {cluster.replica_url(1)}, "
            f"nginx {cluster.balancer_url}); encoder {(out['encoder'] or {}).get('backend')}")
        with httpx.Client(timeout=120.0) as client:  # lazy loads, and each replica's LLM breaker opens
            for index, message in enumerate(warm_msgs):
                chat(client, cluster.replica_url(index % 2), message, f"warm-{index}")
        out["balanced"] = load(cluster.balancer_url, sizes.replica_clients, sizes.replica_seconds, balanced_msgs,
                               "lb")
        out["single"] = load(cluster.replica_url(0), sizes.replica_clients, sizes.replica_seconds, direct_msgs,
                             "one")
        for name in ("balanced", "single"):
            row = out[name]
            log(f"  {name:8} x{row['clients']}: {row['rps']} req/s ({row['small_rps']} on the small route, share "
                f"{row['small_share']:.2f}, of which LLM fallbacks {row['llm_fallbacks']}), p95 {row['p95_ms']} ms, "
                f"errors {row['errors']}")
        if out["single"]["rps"]:
            out["ratio"] = round(out["balanced"]["rps"] / out["single"]["rps"], 3)
        if out["single"]["small_rps"]:
            out["small_ratio"] = round(out["balanced"]["small_rps"] / out["single"]["small_rps"], 3)
        out["cross_replica_cache"] = cross_replica(cluster.replica_url(0), cluster.replica_url(1), cross_msgs, pairs)
        cross = out["cross_replica_cache"]
        log(f"  2 replicas / 1: {out.get('ratio')}; cross-replica cache: {cross['hits']}/{cross['pairs']} hits, "
            f"server p50 {cross['hit_server_ms']['p50']} ms")
    finally:
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)
    return out
