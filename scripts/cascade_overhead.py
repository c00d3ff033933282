"""Routing cost of the cascade (knowledge.cascade), side by side in one process: the bench's routing section
(bench/routing.py: the same mixed messages, no LLM) over the demo KB with the cascade off and on, in turns, both on
the served encoders (MiniLM and mpnet from their ONNX exports, `TANDEM_CASCADE_ENCODER=mpnet tandem models prepare`).

The cascade's second forward pass runs inside the retrieve stage, which the bench reports apart from "routing
overhead"; so both are printed: overhead (guard, cache, rules, embed, score) and overhead plus retrieve.

    .venv/bin/python -m scripts.cascade_overhead [--rounds 2] [--quick] [--out reports/cascade_overhead.json]

``--lengths`` instead times one forward pass of each served encoder by message length (τ-bench requests cut to
8 … 128 words, the encoders taking turns, threads as served): what ``CascadeParams.max_words`` trades.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from datetime import date
from pathlib import Path


def measure(cascade: bool, work: Path, sizes) -> dict:
    from bench import routing
    from chains.runtime import build_runtime, cascade_encoder, serving
    from core.encoders import load_encoder
    from core.settings import get_settings
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.demo_kb import DEMO_FILES
    from storage.db import open_database

    settings = get_settings()
    encoders = {name: serving(load_encoder(name, settings=settings)) for name in ("minilm", "e5")}
    encoders["mpnet"] = cascade_encoder(settings, "mpnet")
    for encoder in encoders.values():  # the query memo would hand the second run its vectors for free
        encoder._memo.cache_clear()
    kb = ChromaKnowledgeBase(encoders["minilm"], path=work / "chroma", language_encoders={"zh": encoders["e5"]},
                             cascade_encoder=encoders["mpnet"] if cascade else None)
    kb.ingest(DEMO_FILES, progress=False)
    runtime = build_runtime(settings, db=open_database(f"sqlite:///{work}/tandem.db"), kb=kb, use_llm=False)
    escalated = [0]
    if kb._snap.cascade is not None:  # count the searches that asked mpnet (the warm-up's included)
        refine = kb._snap.cascade.refine

        def counted(*args, **kwargs):
            escalated[0] += 1
            return refine(*args, **kwargs)

        kb._snap.cascade.refine = counted  # type: ignore[method-assign]
    timings = routing.run_routing(runtime, sizes, lambda line: None)
    return {"cascade": cascade, "messages": timings["queries"],
            "overhead_ms": timings["routing_overhead_ms"], "overhead_plus_retrieve_ms": timings["routing_plus_retrieve_ms"],
            "retrieve_ms": timings["stages_ms"]["retrieve"], "small_total_ms": timings["server_total_by_route_ms"].get(
                "small"), "escalated": escalated[0], "backends": {"minilm": kb.encoder.backend, "mpnet": (
                    kb.cascade_encoder.backend if kb.cascade_encoder else None)}}


LENGTHS = (8, 16, 24, 32, 48, 64, 128)


def cost_by_length(reps: int = 15) -> dict:
    """Encode time (ms, median and p95 over ``reps`` messages) of MiniLM and mpnet, by message length in words."""
    import time

    import numpy as np

    from chains.runtime import cascade_encoder, serving
    from core.encoders import load_encoder
    from core.settings import get_settings
    from offline import datasets as ds

    settings = get_settings()
    encoders = {"minilm": serving(load_encoder("minilm", settings=settings)), "mpnet": cascade_encoder(settings, "mpnet")}
    words = [w for q in ds.tau_bench(("test",)) for w in q.text.split()]
    table: dict = {}
    for length in LENGTHS:
        times: dict[str, list[float]] = {name: [] for name in encoders}
        for rep in range(reps):
            text = " ".join(words[rep * length: (rep + 1) * length])  # a different text each time: no memo hit
            for name, encoder in encoders.items():
                started = time.perf_counter()
                encoder.encode_query(f"{name} {text}")
                times[name].append(1000 * (time.perf_counter() - started))
        table[length] = {name: {"p50": round(float(np.median(t)), 1), "p95": round(float(np.percentile(t, 95)), 1)}
                         for name, t in times.items()}
        print(length, json.dumps(table[length]))
    return {name: encoder.backend for name, encoder in encoders.items()} | {"ms_by_words": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--lengths", action="store_true", help="time each encoder by message length instead")
    parser.add_argument("--out", type=Path, default=Path("reports/cascade_overhead.json"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from bench.common import FULL, QUICK

    if args.lengths:
        report = {"date": date.today().isoformat(), "load_average": os.getloadavg(), **cost_by_length()}
        out = args.out.with_name("cascade_cost_by_length.json")
        out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        return
    runs = []
    for round_ in range(args.rounds):
        for cascade in (False, True):
            with tempfile.TemporaryDirectory(prefix="tandem-cascade-cost-") as tmp:
                run = measure(cascade, Path(tmp), QUICK if args.quick else FULL)
            run["round"] = round_ + 1
            print(json.dumps(run))
            runs.append(run)
    report = {"date": date.today().isoformat(), "load_average": os.getloadavg(), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
