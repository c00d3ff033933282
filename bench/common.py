"""Shared bench helpers: run sizes (full vs quick), percentiles, machine facts and the isolated environment."""

from __future__ import annotations

import os
import platform
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

SEED = 13


@dataclass(frozen=True)
class Sizes:
    """How much traffic each section sends. `quick` is a ~6 minute smoke run; full must fit in 30 minutes on 2 AVX2
    cores (no avx512), where vLLM serves Qwen2.5-0.5B in float32: a chain prompt's first token takes about 3.5 s
    there (0.4 s on an AVX-512 host) and a 48-token answer about 11 s. Sections 0-5 took 588 s on an AVX-512 host
    (2026-12-04), an estimated 17.5 min on AVX2 with the LLM budgets below; the cache sections 6-8 get about 12.5, on
    one pair of vLLM servers. Earlier sizes did not fit: 200 prefix-reuse conversations alone took 38 min (SmolLM2,
    AVX-512), the mixed trace's 30 sessions 25 min (Qwen, AVX-512). Each section's wall time is kept in the report
    (``sections``), to size them again. A larger sample of one cache section: ``python -m bench.prefix_reuse``
    (``bench.mixed_trace``, ``bench.idle_interference``) alone, with its own size option."""

    routing_queries: int
    cache_repeats: int
    profile_queries: int
    per_bot_limit: int | None         # HINT3 test queries per bot (None = all)
    bitext_limit: int | None          # Bitext test queries (None = all)
    bitext_kb_questions: int | None   # Bitext train paraphrases in the KB (None = all)
    tau_limit: int | None             # tau-bench test instructions (None = all)
    llm_sample_calls: int
    http_per_route: int
    http_llm_calls: int
    level_seconds: float
    routing_budget_s: float
    profile_budget_s: float
    llm_budget_s: float
    embed_budget_s: float             # section 3 shrinks its samples when the KBs would take longer to embed
    levels: tuple[int, ...] = (1, 8, 32, 64)
    llm_levels: tuple[int, ...] = (1, 8, 32)  # concurrent streaming clients against the vLLM server
    llm_level_seconds: float = 12.0  # per level; at 32 clients the answers in flight then take ~2 min on AVX2
    llm_questions: int = 40                     # fixed set of customer questions the LLM levels cycle through
    encoder_single: int = 300                   # messages encoded one at a time, per backend
    encoder_batch: int = 320                    # messages encoded in batches of 32, per backend
    encoder_threads: int = 8                    # concurrent threads: micro-batching vs plain
    side_clients: int = 8                       # the torch side-by-side app run
    replica_clients: int = 64
    replica_seconds: float = 15.0
    cross_replica_pairs: int = 50
    # AVX2 estimates: a conversation (4.5 turns, prefill only) about 34 s on both servers; a mixed-trace session about
    # 9 LLM answers over the 5 passes (~100 s) plus two idle windows (~2.5 min); an idle-section live message ~11 s
    prefix_conversations: int = 4               # multi-turn conversations replayed, prefix caching on and off (2.3 min)
    prefix_before_conversations: int = 2        # of those, replayed in the layout before issue 42 too
    prefix_budget_s: float | None = 120.0       # no conversation starts after this much replay (the report counts)
    mixed_sessions: int = 2                     # held-out sessions of the mixed trace, replayed in 5 passes (6.5 min)
    idle_live: int = 5                          # live LLM-bound messages, with the idle-time worker off and on (2.6 min)
    # The handoff section (bench/handoff.py): conversations asking for a person, out-of-scope messages one at a time
    # (the first handoff_predict_sample fill the records: ~11 s each on AVX2), and the records the prediction counts.
    handoff_sessions: int = 20
    handoff_messages: int = 16
    handoff_predict_sample: int = 10
    catalog_messages: int = 200                 # distinct search and as many fact messages per catalog size
    catalog_update_trials: int = 5              # price changes ingested while two replicas are asked the price


FULL = Sizes(routing_queries=1200, cache_repeats=150, profile_queries=300, per_bot_limit=None, bitext_limit=None,
             bitext_kb_questions=None, tau_limit=None, llm_sample_calls=24, http_per_route=100, http_llm_calls=5,
             level_seconds=10.0, routing_budget_s=200.0, profile_budget_s=90.0,
             llm_budget_s=100.0, embed_budget_s=180.0)
QUICK = Sizes(routing_queries=250, cache_repeats=40, profile_queries=100, per_bot_limit=120, bitext_limit=250,
              bitext_kb_questions=1200, tau_limit=40, llm_sample_calls=4, http_per_route=30, http_llm_calls=2,
              level_seconds=3.0, routing_budget_s=45.0, profile_budget_s=20.0,
              llm_budget_s=30.0, embed_budget_s=30.0, llm_level_seconds=6.0, encoder_single=100, encoder_batch=160,
              replica_seconds=5.0, cross_replica_pairs=20, prefix_conversations=2, prefix_before_conversations=1,
              prefix_budget_s=60.0, mixed_sessions=1, idle_live=4, handoff_sessions=8, handoff_messages=8,
              handoff_predict_sample=4, catalog_messages=60, catalog_update_trials=2)


def rng() -> random.Random:
    return random.Random(SEED)


def pct(values: Iterable[float], *qs: float) -> dict[str, float | None]:
    """{"p50": .., "p95": .., ...} in the values' unit, rounded; None when there is nothing to measure."""
    data = np.asarray([v for v in values if v is not None], dtype=float)
    out: dict[str, float | None] = {}
    for q in qs or (50, 95, 99):
        out[f"p{q:g}"] = round(float(np.percentile(data, q)), 3) if data.size else None
    out["n"] = int(data.size)
    return out


def mean(values: Iterable[float]) -> float | None:
    data = [v for v in values if v is not None]
    return round(float(np.mean(data)), 3) if data else None


def machine_info() -> dict:
    """What a reader needs to judge the numbers: cores, CPU, RAM, versions, and how busy the box was."""
    cpu, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not cpu:
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1]
    except OSError:
        pass
    ram_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        import torch

        torch_version = str(torch.__version__)
        torch_threads = torch.get_num_threads()
    except Exception:  # the bench still reports when torch is broken; the sections then fail on their own
        torch_version, torch_threads = "unavailable", None
    # AVX-512 or not: the same "AMD EPYC" name covers both kinds of host here, and vLLM serves bfloat16 only on the
    # first, float32 on AVX2-only ones (a chain prompt's first token 3.5 s there against 0.4 s).
    return {"cores": os.cpu_count(), "cpu": cpu or platform.processor() or "unknown", "ram_gib": ram_gib,
            "avx512": "avx512f" in flags.split() if flags else None,
            "python": platform.python_version(), "torch": torch_version, "torch_threads": torch_threads,
            "platform": platform.platform(), "loadavg_start": [round(x, 2) for x in os.getloadavg()]}


def isolate(root: Path, llm_port: int, max_tokens: int = 48) -> dict[str, Path]:
    """Point this process at a throw-away TANDEM_HOME (the in-process parts) and fix the knobs the bench needs.

    Converted models are reused from the user's model folder, so the bench never converts twice. Must run
    before anything reads the settings; returns the homes (in-process, app) and the model folder.
    """
    from core.model_files import local_llm, prepare_llm
    from core.settings import get_settings, reset_settings

    model_dir = get_settings().models_dir
    llm = local_llm(get_settings())  # the local stand-in TANDEM_LLM_MODEL selects (the bench always serves one itself)
    prepare_llm(llm, model_dir)  # seconds when already converted
    homes = {"inproc": root / "inproc", "app": root / "app", "models": model_dir, "logs": root / "logs"}
    for key in ("inproc", "app", "logs"):
        homes[key].mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "TANDEM_HOME": str(homes["inproc"]), "TANDEM_MODEL_DIR": str(model_dir),
        "TANDEM_DATABASE_URL": "", "TANDEM_CHROMA_URL": "", "TANDEM_API_TOKEN": "",
        "TANDEM_LLM_URL": f"http://127.0.0.1:{llm_port}/v1", "TANDEM_LLM_MODEL": llm.name,
        "TANDEM_LLM_MAX_TOKENS": str(max_tokens),
        # The load generator is one client hammering the API; a per-address limit would measure the limiter.
        "TANDEM_RATE_LIMIT_PER_MIN": "0", "TANDEM_RATE_LIMIT_TOTAL_PER_MIN": "0", "TANDEM_LLM_TOKENS_PER_MIN": "0",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
    })
    reset_settings()
    return homes


def app_env(homes: dict[str, Path]) -> dict[str, str]:
    """Environment of the app subprocess: same knobs, its own home (two processes must not share Chroma)."""
    return {**os.environ, "TANDEM_HOME": str(homes["app"]), "PYTHONUNBUFFERED": "1"}


class Clock:
    """Elapsed wall time per bench section, for the report and the 15-minute budget."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.sections: dict[str, float] = {}

    def lap(self, name: str, since: float) -> None:
        self.sections[name] = round(self.sections.get(name, 0.0) + time.perf_counter() - since, 1)

    @property
    def total(self) -> float:
        return round(time.perf_counter() - self.start, 1)


def closed_loop(clients: int, seconds: float, next_job: Callable[[], Any], send: Callable[[httpx.Client, Any], dict],
                client_options: dict[str, Any], join_grace_s: float = 120.0) -> tuple[list[dict], float]:
    """`clients` threads, each with its own one-connection client, sending back to back until `seconds` pass or
    `next_job` (called under a lock) returns None. A request begun before the deadline may finish; the elapsed
    time runs until the last one has. Returns the rows `send` produced and that elapsed time."""
    rows: list[dict] = []
    lock = threading.Lock()
    gate = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def worker() -> None:
        with httpx.Client(limits=httpx.Limits(max_connections=1), **client_options) as client:
            gate.wait()
            while time.perf_counter() < stop_at[0]:
                with lock:
                    job = next_job()
                if job is None:
                    return
                row = send(client, job)
                with lock:
                    rows.append(row)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    stop_at[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    gate.wait()
    for thread in threads:
        thread.join(seconds + join_grace_s)
    return rows, time.perf_counter() - began


def replay_setup(settings, prefix: str) -> tuple[Path, Any, Any]:
    """What the trace benches (bench/mixed_trace.py, bench/idle_interference.py) replay on: a fresh folder, the
    settings with greedy answers and no rate limits (the bench measures the caches, not the limits), and the demo KB
    in a Chroma store of that folder, on the settings' encoder."""
    import tempfile

    from chains.runtime import serving
    from core.encoders import load_encoder
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.demo_kb import DEMO_FILES

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    settings = settings.model_copy(update={"llm_temperature": 0.0, "rate_limit_per_min": 0, "llm_tokens_per_min": 0})
    kb = ChromaKnowledgeBase(serving(load_encoder(settings.encoder, settings.home, settings=settings)),
                             path=folder / "chroma")
    kb.ingest(DEMO_FILES, progress=False)
    return folder, settings, kb


def standalone(measure: Callable[[Callable[[str], None]], dict], table: Callable[[dict], list[str]],
               out: Path | None) -> int:
    """A bench module run alone (``python -m bench.X``): offline, ``measure(log)`` timed, its JSON and table
    printed, and the JSON written to ``out``."""
    import json

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    began = time.perf_counter()
    result = measure(lambda m: print(m, flush=True))
    result["duration_s"] = round(time.perf_counter() - began, 1)
    text = json.dumps(result, indent=1)
    print(text)
    print("\n".join(table(result)))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    return 0
