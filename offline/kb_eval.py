"""Retrieval accuracy and latency of a throwaway KB against labelled queries (`tandem kb eval`).

Datasets:
* Bitext: ``--kb kb_answers.csv --questions train.csv --queries test.csv`` (labels in ``answer_id``).
* Banking77: ``--kb train.csv --queries test.csv --id-column intent`` (the KB is the train questions,
  one stub answer per intent).
* CLINC150 in-scope: ``--kb train.csv --queries test.csv --id-column intent --where in_scope=True``.
"""

from __future__ import annotations

import csv
import random
import time
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from core.encoders import Encoder
from core.errors import TandemError
from knowledge.index import FusionParams
from knowledge.throwaway import throwaway_kb

LATENCY_SAMPLE = 200


class EvalResult(BaseModel):
    queries: int
    top1: float
    top3: float
    search_p50_ms: float  # with the query vector given (the router's hot path)
    search_p95_ms: float
    end_to_end_p50_ms: float  # embedding + search, on up to LATENCY_SAMPLE queries
    end_to_end_p95_ms: float
    kb_answers: int
    kb_records: int
    build_s: float
    unknown_labels: int  # queries whose label is not in the KB (counted as misses)

    def lines(self) -> list[str]:
        return [
            f"queries {self.queries}  KB {self.kb_answers} answers / {self.kb_records} records (built in {self.build_s:.0f} s)",
            f"top-1 accuracy {self.top1:.4f}   top-3 accuracy {self.top3:.4f}"
            + (f"   ({self.unknown_labels} queries with labels not in the KB)" if self.unknown_labels else ""),
            f"search latency p50 {self.search_p50_ms:.2f} ms  p95 {self.search_p95_ms:.2f} ms (vector given)",
            f"embed+search   p50 {self.end_to_end_p50_ms:.2f} ms  p95 {self.end_to_end_p95_ms:.2f} ms",
        ]


def read_queries(path: Path, id_column: str = "answer_id", query_column: str = "query",
                 where: dict[str, str] | None = None, limit: int | None = None) -> list[tuple[str, str]]:
    """(query, label) pairs; ``limit`` takes a fixed-seed sample so every label can show up."""
    try:
        with Path(path).open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = {id_column, query_column} - set(reader.fieldnames or [])
            if missing:
                raise TandemError(f"{Path(path).name} has no column(s) {', '.join(sorted(missing))}. "
                                  f"Fix: pass --id-column / --query-column")
            rows = [(r[query_column], r[id_column]) for r in reader
                    if (r.get(query_column) or "").strip() and
                    all((r.get(k) or "").lower() == v.lower() for k, v in (where or {}).items())]
    except OSError as exc:
        raise TandemError(f"cannot read {path} ({exc.strerror})") from None
    if limit is not None and limit < len(rows):
        rows = random.Random(13).sample(rows, limit)
    return rows


def evaluate(encoder: Encoder, kb_csv: Path, queries_csv: Path, questions_csv: Path | None = None, *,
             id_column: str = "answer_id",
             query_column: str = "query", where: dict[str, str] | None = None, limit: int | None = None,
             params: FusionParams | None = None, progress: bool = True) -> EvalResult:
    queries = read_queries(queries_csv, id_column, query_column, where, limit)
    if not queries:
        raise TandemError(f"{Path(queries_csv).name}: no queries to evaluate")
    started = time.perf_counter()
    kb = throwaway_kb(encoder, Path(kb_csv), questions_csv and Path(questions_csv), id_column=id_column, where=where,
                      progress=progress, params=params)
    build_s = time.perf_counter() - started
    vectors = kb.embed_messages([q for q, _ in queries])
    known = set(kb.answer_texts())
    top1 = top3 = unknown = 0
    search_ms = []
    for (query, label), vector in zip(queries, vectors):
        t0 = time.perf_counter()
        hits = kb.search(query, k=3, vector=vector)
        search_ms.append((time.perf_counter() - t0) * 1000)
        ids = [h.answer_id for h in hits]
        top1 += bool(ids) and ids[0] == label
        top3 += label in ids
        unknown += label not in known
    e2e_ms = []
    for query, _ in queries[:LATENCY_SAMPLE]:
        t0 = time.perf_counter()
        kb.search(query, k=3, vector=kb.embed_messages([query])[0])  # not encode_query: its memo hides the cost
        e2e_ms.append((time.perf_counter() - t0) * 1000)
    n = len(queries)
    return EvalResult(queries=n, top1=top1 / n, top3=top3 / n,
                      search_p50_ms=float(np.percentile(search_ms, 50)), search_p95_ms=float(np.percentile(search_ms, 95)),
                      end_to_end_p50_ms=float(np.percentile(e2e_ms, 50)), end_to_end_p95_ms=float(np.percentile(e2e_ms, 95)),
                      kb_answers=len(kb), kb_records=kb.searchable_records, build_s=build_s, unknown_labels=unknown)
