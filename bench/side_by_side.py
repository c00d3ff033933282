"""The served encoder backend against torch fp32, in the app: a second, shorter `tandem serve` run with
``TANDEM_ENCODER_BACKEND=torch`` on the same home, KB and messages as the first.

Same sequential small-path messages as the first app's end-to-end section (small answer p50, server side), the
same cache set, and the same slice of fresh small-path messages as the first app's 8-client level. The ratios are
served backend / torch: above 1 for requests per second and below 1 for latency mean the served backend is faster.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from pathlib import Path

import httpx

from bench import http_load
from chains.tiers.base import SMALL_ROUTE


def level_slice(pool: list[str], levels: tuple[int, ...], clients: int) -> list[str]:
    """The slice of fresh small-path messages `http_load.throughput` gave the level with `clients` clients."""
    size = max(1, len(pool) // len(levels))
    index = levels.index(clients) if clients in levels else 0
    return pool[index * size:(index + 1) * size]


def torch_run(port: int, env: dict[str, str], log_path: Path, small: list[str], cache_candidates: list[str],
              fresh: list[str], sizes, log: Callable[[str], None]) -> dict:
    app = http_load.App(port=port, env={**env, "TANDEM_ENCODER_BACKEND": "torch"}, log_path=log_path)
    try:
        app.start()
        out: dict = {"backend": (http_load.served_encoder(app.url) or {}).get("backend"), "cold_start_s": app.cold_start_s}
        cache_set = http_load.cacheable_set(app, cache_candidates) if cache_candidates else []
        with httpx.Client(timeout=180.0) as client:
            out[SMALL_ROUTE] = http_load._summary([http_load._post(client, app.url, m) for m in small], SMALL_ROUTE)
        if not cache_set:
            # The first app's cache set was warmed while the LLM was up; here it is down, and an answer that fell
            # back from the LLM is never cached. Small-tier answers are: try the messages just answered.
            cache_set = http_load.cacheable_set(app, small[:24])
        out["cache_messages"] = len(cache_set)
        if not cache_set:
            out["cache_note"] = "no cacheable message with the LLM down (fallback answers are not cached)"
        clients = sizes.side_clients
        if cache_set:
            cycle = itertools.cycle(cache_set)
            out["cache_level"] = http_load.load_level(app, clients, sizes.level_seconds,
                                                      functools.partial(next, cycle), "cache")
        supply = iter(fresh)
        out["small_level"] = http_load.load_level(app, clients, sizes.level_seconds,
                                                  functools.partial(next, supply, None), SMALL_ROUTE)
        out["rss_mib"] = app.rss_mib().get("rss_mib")
        log(f"  torch app: small p50 {out['small']['server_ms']['p50']} ms (server); x{clients} small "
            f"{out['small_level']['rps']} req/s, cache {(out.get('cache_level') or {}).get('rps')} req/s; "
            f"rss {out['rss_mib']} MiB")
        return out
    finally:
        app.stop()


def ratios(result: dict, torch: dict, clients: int) -> dict:
    """Served backend / torch for the 8-client small and cache levels and the small answer p50 (server)."""
    def level(path: str) -> dict:
        return next((c for c in result.get("concurrency") or [] if c["clients"] == clients and c["path"] == path), {})

    def ratio(a, b):
        return round(a / b, 3) if a is not None and b else None

    served_small = (((result.get("end_to_end") or {}).get("routes") or {}).get(SMALL_ROUTE) or {}).get("server_ms", {})
    return {"small_rps": ratio(level(SMALL_ROUTE).get("rps"), torch["small_level"].get("rps")),
            "cache_rps": ratio(level("cache").get("rps"), (torch.get("cache_level") or {}).get("rps")),
            "small_p50_server_ms": ratio(served_small.get("p50"), torch[SMALL_ROUTE]["server_ms"].get("p50"))}
