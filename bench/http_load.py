"""Sections 2, 4 and 5 against a real app: `tandem serve` as a subprocess, driven over `POST /api/v1/chat`.

End-to-end latency per route (server-side `latency_ms.total` and client-side round trip), throughput at
several concurrency levels with thread clients, the app's resident memory, and cold start.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import closed_loop, mean, pct
from bench.traffic import TOOL_MESSAGES, TOOL_USER
from chains.tiers.base import SMALL_ROUTE
from core.errors import TandemError

CHAT = "/api/v1/chat"


@dataclass
class App:
    """The chat app in its own process group, with the cold-start time of its first answer."""

    port: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen | None = None
    cold_start_s: float | None = None
    rss_samples_mib: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 300.0) -> App:
        tandem = str(Path(sys.executable).parent / "tandem")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen([tandem, "serve", "--port", str(self.port), "--host", "127.0.0.1"],
                                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self.env, start_new_session=True)
        deadline = started + timeout
        with httpx.Client(timeout=30.0) as client:
            while time.perf_counter() < deadline:
                if self.process.poll() is not None:
                    raise TandemError(f"the app exited during start (code {self.process.returncode}); "
                                      f"log: {self.log_path}: {_tail(self.log_path)}")
                try:
                    reply = client.post(self.url + CHAT, json={"message": "What are your opening hours?"})
                    if reply.status_code == 200:
                        self.cold_start_s = round(time.perf_counter() - started, 2)
                        return self
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise TandemError(f"the app did not answer {CHAT} within {timeout:.0f} s; log: {self.log_path}")

    def rss_mib(self) -> dict[str, float]:
        """Resident memory of the app process (and any children), from /proc."""
        import psutil

        assert self.process is not None, "the app is not running"
        proc = psutil.Process(self.process.pid)
        members = [proc, *proc.children(recursive=True)]
        rss = sum(p.memory_info().rss for p in members if p.is_running()) / 2**20
        peak = _vm_hwm_mib(self.process.pid)
        self.rss_samples_mib.append(rss)
        return {"rss_mib": round(rss, 1), "peak_rss_mib": peak}

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        except ProcessLookupError:
            pass


def _vm_hwm_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])[-600:]
    except OSError:
        return "no log"


def _post(client: httpx.Client, url: str, message: str, user_id: str = "") -> dict:
    started = time.perf_counter()
    try:
        reply = client.post(url + CHAT, json={"message": message, "user_id": user_id})
        elapsed = (time.perf_counter() - started) * 1000
        body = reply.json() if reply.headers.get("content-type", "").startswith("application/json") else {}
        return {"status": reply.status_code, "client_ms": elapsed, "route": body.get("route"),
                "server_ms": (body.get("latency_ms") or {}).get("total"), "degraded": body.get("degraded"),
                "fallback": body.get("fallback")}
    except httpx.HTTPError as exc:
        return {"status": 0, "client_ms": (time.perf_counter() - started) * 1000, "route": None,
                "server_ms": None, "error": f"{exc.__class__.__name__}: {exc}"[:200]}


def _summary(rows: list[dict], expected: str) -> dict:
    hit = [r for r in rows if r["route"] == expected]
    return {"requests": len(rows), "answered_by_route": len(hit),
            "errors": sum(r["status"] != 200 for r in rows),
            "other_routes": sorted({r["route"] or "error" for r in rows} - {expected}),
            "server_ms": {**pct(r["server_ms"] for r in hit), "mean": mean(r["server_ms"] for r in hit)},
            "http_ms": {**pct(r["client_ms"] for r in hit), "mean": mean(r["client_ms"] for r in hit)},
            "degraded_or_fallback": sum(bool(r.get("degraded") or r.get("fallback")) for r in rows)}


def served_encoder(url: str) -> dict | None:
    """What an app says it embeds with (GET /healthz: encoder name, version, backend), or None."""
    try:
        return httpx.get(url + "/healthz", timeout=10.0).json().get("encoder")
    except (httpx.HTTPError, ValueError):
        return None


def cacheable_set(app: App, candidates: list[str]) -> list[str]:
    """Ask each candidate twice; keep those whose repeat is a cache hit (answers with personal data, e.g.
    a support phone number, are never cached, by design)."""
    with httpx.Client(timeout=120.0) as client:
        for message in candidates:
            _post(client, app.url, message)
        return [m for m in candidates if _post(client, app.url, m)["route"] == "cache"]


def per_route(app: App, small: list[str], cache_set: list[str], llm: list[str], sizes,
              log: Callable[[str], None]) -> dict:
    """Sequential requests per route; server-side totals and HTTP round trips side by side."""
    out = {}
    log(f"  HTTP per route: cache, tool x {sizes.http_per_route}; small x {len(small)}; llm x {len(llm)}")
    with httpx.Client(timeout=180.0) as client:
        out["cache"] = _summary([_post(client, app.url, cache_set[i % len(cache_set)])
                                 for i in range(sizes.http_per_route)], "cache")
        out["tool"] = _summary([_post(client, app.url, TOOL_MESSAGES[i % len(TOOL_MESSAGES)], TOOL_USER)
                                for i in range(sizes.http_per_route)], "tool")
        out[SMALL_ROUTE] = _summary([_post(client, app.url, message) for message in small], SMALL_ROUTE)
        llm_rows: list[dict] = []
        deadline = time.perf_counter() + sizes.llm_budget_s / 2
        for message in llm:
            if llm_rows and time.perf_counter() > deadline:
                log(f"    llm path budget spent after {len(llm_rows)} requests")
                break
            llm_rows.append(_post(client, app.url, message))
            log(f"    llm path: answered by {llm_rows[-1]['route']} in {llm_rows[-1]['client_ms'] / 1000:.1f} s"
                + (" (fallback)" if llm_rows[-1].get("fallback") else ""))
        out["llm"] = _summary(llm_rows, "llm")
    return out


def load_level(app: App, clients: int, seconds: float, messages: Callable[[], str | None], expected: str) -> dict:
    """`clients` threads, each with its own connection, posting back to back for `seconds` (or until the
    message supply runs out). Requests per second counts every completed request, errors included."""
    rows, elapsed = closed_loop(clients, seconds, messages, lambda client, message: _post(client, app.url, message),
                                {"timeout": 60.0})
    memory = app.rss_mib()
    ok = [r for r in rows if r["status"] == 200]
    return {"clients": clients, "path": expected, "requests": len(rows), "seconds": round(elapsed, 2),
            "rps": round(len(rows) / elapsed, 2) if elapsed else None,
            "p50_ms": pct((r["client_ms"] for r in ok), 50)["p50"],
            "p95_ms": pct((r["client_ms"] for r in ok), 95)["p95"],
            "errors": len(rows) - len(ok),
            "route_share": round(sum(r["route"] == expected for r in rows) / max(len(rows), 1), 4),
            "error_examples": sorted({r.get("error") or str(r["status"]) for r in rows if r["status"] != 200})[:3],
            **memory}


def throughput(app: App, small_pool: list[str], cache_warm: list[str], sizes, log: Callable[[str], None]) -> list[dict]:
    """Each level on the cache path (repeats of answered questions) and on the small path (fresh questions,
    a disjoint slice of the pool per level so that no level is served by the cache or the embedding memo)."""
    levels = []
    slice_size = max(1, len(small_pool) // len(sizes.levels))
    for index, clients in enumerate(sizes.levels):
        if cache_warm:
            cycle = itertools.cycle(cache_warm)
            levels.append(load_level(app, clients, sizes.level_seconds, functools.partial(next, cycle), "cache"))
        fresh = iter(small_pool[index * slice_size:(index + 1) * slice_size])
        levels.append(load_level(app, clients, sizes.level_seconds, functools.partial(next, fresh, None), SMALL_ROUTE))
        for row in levels[-2 if cache_warm else -1:]:
            log(f"  {row['path']:5} x{clients:<3} {row['rps']:7.1f} req/s  p95 {row['p95_ms']} ms  "
                f"errors {row['errors']}  route share {row['route_share']:.2f}  rss {row['rss_mib']} MiB")
    return levels
