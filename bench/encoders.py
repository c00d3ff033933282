"""Encoder backends side by side: torch fp32, ONNX fp32 and ONNX int8 of the base MiniLM, on the same texts.

Per backend: single-message encode latency (one message at a time, the backends interleaved message by message so
a load spike hits all three alike), batch-of-32 throughput, and agreement with torch on the demo KB's questions
(mean cosine of the same question's vectors; top-1 agreement of each question's nearest other question, the
measure the export's accuracy gate uses). Then the micro-batching encoder (`BatchingEncoder`) against the plain
one at 8 concurrent threads, and its single-message overhead when alone.

The ONNX export comes from the user's model folder when `tandem models prepare` made a current one, else it is
made here (`offline.encoder_export.export_and_gate`) in the bench's temp dir. Either way it is linked into the
bench's homes, so the in-process sections and the app serve what the export's gate chose, as a prepared install.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.common import mean, pct
from bench.traffic import mixed_queries

TORCH, ONNX_FP32, ONNX_INT8 = "torch-fp32", "onnx-fp32", "onnx-int8"
# export.json's "chosen" (also TANDEM_ENCODER_BACKEND's values) -> the name used in this report
CHOSEN = {"onnx": ONNX_FP32, "onnx-int8": ONNX_INT8, "torch": TORCH}


def demo_questions() -> tuple[list[str], list[str]]:
    """The demo KB's stored questions and their answer ids (what `tandem models prepare` gates the export on)."""
    from knowledge.demo_kb import DEMO_DIR

    with (DEMO_DIR / "questions.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r["query"] for r in rows], [r["answer_id"] for r in rows]


def _current(folder: Path, version: str) -> bool:
    from core.encoders import EXPORT_FILE, INT8_FILE, ONNX_FILE

    try:
        record = json.loads((folder / EXPORT_FILE).read_text())
    except (OSError, ValueError):
        return False
    return record.get("version") == version and (folder / ONNX_FILE).is_file() and (folder / INT8_FILE).is_file()


def ensure_export(homes: dict[str, Path], work: Path, log: Callable[[str], None]) -> dict:
    """The base MiniLM's ONNX export, reused or made, linked where each bench home looks for it."""
    from core.encoders import EXPORT_FILE, export_dir, folder_version
    from core.model_files import minilm_path
    from offline.encoder_export import export_and_gate

    folder = minilm_path()
    version = folder_version(folder)
    name = export_dir(folder, homes["inproc"]).name
    user_export = homes["models"] / name  # `tandem models prepare` on a home whose models live there
    began = time.perf_counter()
    if _current(user_export, version):
        source, how = user_export, f"export reused from {user_export}"
    else:
        source = work / name
        texts, labels = demo_questions()
        log(f"  no current ONNX export of MiniLM in {homes['models']}: exporting it to {source}")
        export_and_gate(folder, source, texts, labels, log=lambda line: log("  " + line))
        how = "exported in this run"  # into the bench's temp dir
    for home in ("inproc", "app"):
        link_export(source, export_dir(folder, homes[home]))
    record = json.loads((source / EXPORT_FILE).read_text())
    return {"folder": str(source), "how": how, "seconds": round(time.perf_counter() - began, 1),
            "chosen": record.get("chosen"), "served": CHOSEN.get(record.get("chosen", ""), record.get("chosen")),
            "gate": {k: record.get(k) for k in ("int8_top1_agreement", "gate", "fp32_min_cosine", "int8_mean_cosine",
                                                "quantization", "questions")}}


def link_export(source: Path, target: Path) -> None:
    """Make ``target`` (where a home's `load_encoder` looks) point at the export folder ``source``."""
    if target.resolve() == source.resolve():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        return  # a home that already has an export keeps it
    target.symlink_to(source.resolve(), target_is_directory=True)


def _backends(export_folder: Path) -> dict:
    from core.encoders import INT8_FILE, ONNX_FILE, OnnxEncoder, TransformerEncoder, folder_version
    from core.model_files import minilm_path

    folder = minilm_path()
    version = folder_version(folder)
    return {TORCH: TransformerEncoder(folder, "minilm"),
            ONNX_FP32: OnnxEncoder(export_folder, "minilm", ONNX_FILE, version),
            ONNX_INT8: OnnxEncoder(export_folder, "minilm", INT8_FILE, version)}


def _ms(func, *args) -> float:
    began = time.perf_counter()
    func(*args)
    return (time.perf_counter() - began) * 1000


def threaded_rate(encoder, texts: Sequence[str], threads: int) -> dict:
    """`threads` threads each encoding one message at a time (as request threads do) until the texts run out."""
    supply = iter(texts)
    lock = threading.Lock()
    gate = threading.Barrier(threads + 1)
    latencies: list[float] = []

    def worker() -> None:
        gate.wait()
        while True:
            with lock:
                text = next(supply, None)
            if text is None:
                return
            took = _ms(encoder.encode_queries, [text])
            with lock:
                latencies.append(took)

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    began = time.perf_counter()
    gate.wait()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    return {"messages": len(latencies), "seconds": round(elapsed, 2),
            "messages_per_s": round(len(latencies) / elapsed, 1) if elapsed else None,
            "p50_ms": pct(latencies, 50)["p50"], "p95_ms": pct(latencies, 95)["p95"]}


def micro_batching(plain, texts: Sequence[str], threads: int) -> dict:
    """BatchingEncoder vs the plain encoder at `threads` concurrent threads, and alone (single-message overhead)."""
    from core.encoders import BatchingEncoder

    plain_rate = threaded_rate(plain, texts, threads)
    batching = BatchingEncoder(plain)
    batched_rate = threaded_rate(batching, texts, threads)
    passes, served = batching.passes, batching.messages
    alone = BatchingEncoder(plain)
    plain_ms, alone_ms = [], []
    for text in texts:  # interleaved, so drift in machine load hits both alike
        plain_ms.append(_ms(plain.encode_queries, [text]))
        alone_ms.append(_ms(alone.encode_queries, [text]))
    p50_plain, p50_alone = pct(plain_ms, 50)["p50"], pct(alone_ms, 50)["p50"]
    return {"threads": threads, "plain": plain_rate, "batching": {**batched_rate, "passes": passes,
                                                                  "mean_batch": round(served / max(passes, 1), 2)},
            "throughput_ratio": round(batched_rate["messages_per_s"] / plain_rate["messages_per_s"], 3)
            if batched_rate["messages_per_s"] and plain_rate["messages_per_s"] else None,
            "single_p50_ms": {"plain": p50_plain, "batching": p50_alone},
            "single_overhead_p50_ms": round(p50_alone - p50_plain, 3)
            if p50_alone is not None and p50_plain is not None else None}


def short_messages(n: int) -> list[str]:
    """`n` distinct short customer messages (Bitext test): what micro-batching gains on when nothing pads."""
    from offline import datasets as ds

    return list(dict.fromkeys(" ".join(q.text.split()) for q in ds.bitext("test")))[:n]


def run_encoders(export: dict, sizes, log: Callable[[str], None]) -> dict:
    from offline.encoder_export import agreement

    backends = _backends(Path(export["folder"]))
    texts = [" ".join(q.text.split()) for q in mixed_queries(max(sizes.encoder_single, sizes.encoder_batch))]
    single_texts, batch_texts = texts[:sizes.encoder_single], texts[:sizes.encoder_batch]
    questions, labels = demo_questions()
    log(f"  encoders: {', '.join(backends)}; {len(single_texts)} single messages, {len(batch_texts)} in batches of "
        f"32, agreement on {len(questions)} demo KB questions")
    for encoder in backends.values():  # first calls pay lazy set-up
        encoder.encode_queries(texts[:4])
        encoder.encode_queries(texts[:32], batch_size=32)
    single: dict[str, list[float]] = {name: [] for name in backends}
    for text in single_texts:
        for name, encoder in backends.items():
            single[name].append(_ms(encoder.encode_queries, [text]))
    reference = backends[TORCH].encode_queries(questions)
    out: dict = {"texts": "mixed test messages (Bitext, CLINC, Banking77, HINT3, tau-bench)",
                 "single_messages": len(single_texts), "batch_messages": len(batch_texts),
                 "agreement_questions": len(questions), "backends": {}}
    for name, encoder in backends.items():
        began = time.perf_counter()
        encoder.encode_queries(batch_texts, batch_size=32)
        batch_s = time.perf_counter() - began
        vectors = reference if name == TORCH else encoder.encode_queries(questions)
        cosines = (vectors * reference).sum(1)
        out["backends"][name] = {
            "single_ms": {**pct(single[name], 50, 95), "mean": mean(single[name])},
            "batch32_messages_per_s": round(len(batch_texts) / batch_s, 1),
            "mean_cosine_vs_torch": round(float(cosines.mean()), 6),
            "min_cosine_vs_torch": round(float(cosines.min()), 6),
            "top1_agreement_vs_torch": round(agreement(reference, vectors, labels), 4)}
        row = out["backends"][name]
        log(f"  {name:10} single p50 {row['single_ms']['p50']} ms p95 {row['single_ms']['p95']} ms; batch-32 "
            f"{row['batch32_messages_per_s']} msg/s; cosine {row['mean_cosine_vs_torch']}, top-1 "
            f"{row['top1_agreement_vs_torch']}")
    served = export.get("served") if export.get("served") in backends else TORCH
    out["served"] = served
    threaded_texts = texts[:sizes.encoder_single]
    short_texts = short_messages(sizes.encoder_single)
    out["micro_batching"] = {}
    out["micro_batching_texts"] = ("the mixed messages above (a fifth are long tau-bench instructions: a batch is "
                                   "padded to its longest message); short_texts: Bitext test messages only")
    for name in dict.fromkeys((served, TORCH)):
        row = micro_batching(backends[name], threaded_texts, sizes.encoder_threads)
        short = micro_batching(backends[name], short_texts, sizes.encoder_threads)
        row["short_texts"] = {"plain_messages_per_s": short["plain"]["messages_per_s"],
                              "batching_messages_per_s": short["batching"]["messages_per_s"],
                              "mean_batch": short["batching"]["mean_batch"],
                              "throughput_ratio": short["throughput_ratio"]}
        out["micro_batching"][name] = row
        log(f"  micro-batching ({name}) x{row['threads']} threads: {row['batching']['messages_per_s']} msg/s vs "
            f"plain {row['plain']['messages_per_s']} msg/s (mean batch {row['batching']['mean_batch']}); short "
            f"messages only: {short['batching']['messages_per_s']} vs {short['plain']['messages_per_s']} msg/s; "
            f"alone: {row['single_overhead_p50_ms']:+.3f} ms p50 vs plain")
    del backends
    return out


def speedups(report: dict) -> dict:
    """Each backend against torch: single-message p50 and batch throughput, as ratios (>1 is faster)."""
    rows = report.get("backends") or {}
    base = rows.get(TORCH)
    if not base:
        return {}
    out = {}
    for name, row in rows.items():
        p50, base_p50 = row["single_ms"]["p50"], base["single_ms"]["p50"]
        out[name] = {"single_p50_speedup": round(base_p50 / p50, 2) if p50 and base_p50 else None,
                     "batch32_speedup": round(row["batch32_messages_per_s"] / base["batch32_messages_per_s"], 2)
                     if base["batch32_messages_per_s"] else None}
    return out

