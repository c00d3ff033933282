"""Readers for the public datasets in $TANDEM_DATA_DIR (../shared/data): rows of (text, label, group).

Only train/valid files feed training and threshold choice; test files are read for reporting only.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import TandemError
from core.settings import get_settings
from knowledge.ingest import OUT_OF_SCOPE


@dataclass(frozen=True)
class Query:
    text: str
    needs_llm: int          # 1 = out of scope or too complex for the FAQ tier
    answer_id: str = ""     # the right KB answer for in-scope queries
    group: str = ""         # dataset (and bot, for HINT3)


def data_dir() -> Path:
    path = get_settings().data_dir
    if not path.is_dir():
        raise TandemError(f"dataset folder {path} not found. Fix: set TANDEM_DATA_DIR to the shared data folder")
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def in_split_a(text: str, share_a: float = 0.8) -> bool:
    """A stable split of a train file into a part for the KB/model (A) and a part for validation (B)."""
    return int(hashlib.md5(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share_a


def clinc(split: str) -> list[Query]:
    return [Query(r["query"], int(r["in_scope"] != "True"), r["intent"] if r["in_scope"] == "True" else "",
                  "clinc150") for r in read_csv(data_dir() / "clinc150" / f"{split}.csv")]


def banking(split: str) -> list[Query]:
    return [Query(r["query"], int(r["in_scope_b77oos"] != "True"), r["intent"], "banking77")
            for r in read_csv(data_dir() / "banking77" / f"{split}.csv")]


def bitext(split: str) -> list[Query]:
    return [Query(r["query"], 0, r["answer_id"], "bitext") for r in read_csv(data_dir() / "bitext_cs_faq" / f"{split}.csv")]


def bitext_answers() -> dict[str, str]:
    """The Bitext FAQ's 27 answers by answer_id: the KB every Bitext evaluation builds on."""
    return {r["answer_id"]: r["answer"] for r in read_csv(data_dir() / "bitext_cs_faq" / "kb_answers.csv")}


def hint3(split: str) -> list[Query]:
    return [Query(r["query"], int(r["in_scope"] != "True"), r["intent"] if r["in_scope"] == "True" else "",
                  f"hint3/{r['bot']}") for r in read_csv(data_dir() / "hint3" / f"{split}.csv")]


def tau_bench(splits: tuple[str, ...]) -> list[Query]:
    rows = [json.loads(line) for line in (data_dir() / "tau_bench_hard_requests" / "tasks.jsonl").open()]
    return [Query(r["instruction"], 1, "", f"tau/{r['domain']}") for r in rows if r["split"] in splits]


def write_kb_csvs(folder: Path, answers: dict[str, str], questions: list[tuple[str, str]]) -> tuple[Path, Path]:
    """Write a KB as the two CSVs `throwaway_kb` reads: answers (answer_id,answer) and questions."""
    folder.mkdir(parents=True, exist_ok=True)
    answers_csv, questions_csv = folder / "answers.csv", folder / "questions.csv"
    with answers_csv.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["answer_id", "title", "answer"])
        for answer_id, answer in answers.items():
            writer.writerow([answer_id, answer_id.replace("_", " "), answer])
    with questions_csv.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query", "answer_id"])
        writer.writerows(questions)
    return answers_csv, questions_csv


def intent_kb(folder: Path, queries: list[Query], out_of_scope: Sequence[Query] = ()) -> Path:
    """A questions CSV (query,answer_id) of the in-scope queries: `throwaway_kb` turns each intent into
    one answer that is found through its paraphrases (intent datasets have no answer texts). The messages in
    ``out_of_scope`` become the KB's out-of-scope examples."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "questions.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query", "answer_id"])
        writer.writerows((q.text, q.answer_id) for q in queries if q.answer_id and not q.needs_llm)
        writer.writerows((q.text, OUT_OF_SCOPE) for q in out_of_scope)
    return path


EVAL_DIR = Path(__file__).resolve().parent.parent / "knowledge" / "eval"
BITEXT_HELDOUT = EVAL_DIR / "bitext_heldout.csv"  # report only: never read by training or tuning
BITEXT_DEV = EVAL_DIR / "bitext_dev.csv"
CHINESE = EVAL_DIR / "zh" / "paraphrases.csv"
DEMO_SHOP = EVAL_DIR / "demo_shop.csv"


def _handwritten(path: Path, group: str, split: str | None = None) -> list[Query]:
    return [Query(r["query"], int(r["in_scope"] != "True"), r["answer_id"], group)
            for r in read_csv(path) if split is None or r.get("split") == split]


def bitext_dev() -> list[Query]:
    """Hand-written natural messages for the Bitext FAQ, for choosing and fitting (never reported)."""
    return _handwritten(BITEXT_DEV, "bitext-dev")


def bitext_heldout() -> list[Query]:
    """Hand-written natural messages for the Bitext FAQ, for reporting only (`make eval`)."""
    return _handwritten(BITEXT_HELDOUT, "bitext-heldout")


def demo_shop_dev() -> list[Query]:
    """Hand-written messages to the demo shop, its dev split (to look at failures and choose thresholds; the held-out
    split is for reporting only and is read by `make eval` alone)."""
    return _handwritten(DEMO_SHOP, "demo-dev", "dev")


def chinese(split: str) -> list[Query]:
    """Hand-written Chinese messages for the Chinese Northwind FAQ (train/valid to fit, test to report)."""
    return _handwritten(CHINESE, f"zh-{split}", split)
