"""The cascade's margin and weight (knowledge.cascade), chosen on development messages only, then reported on
held-out: top-1 and the share of messages that ask the stronger encoder, against MiniLM alone.

Two KBs, built as `make eval` builds them: the Bitext FAQ (answers and train questions, MiniLM tuned on it) with the
hand-written development and held-out sets, and the demo shop as `make demo` ships it (base MiniLM) with the demo-shop
set's dev and held-out splits. Each English message is searched once in MiniLM's space and once in mpnet's (the
product's own search in both); every (margin, weight) pair is then scored from those two lists with the product's
fusion (``knowledge.cascade.fuse``). The pair with the best pooled in-scope dev top-1 among those that send at most
``--max-escalation`` of all dev messages (in scope or not: all pay for it) to mpnet wins; ties: fewer escalations,
then more MiniLM.

    TANDEM_CASCADE_ENCODER=mpnet .venv/bin/python scripts/cascade_fit.py [--out reports/cascade_fit.json]
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from core.settings import get_settings
from knowledge.cascade import MAX_WORDS, POOL, fuse, within_words
from knowledge.chroma_kb import ChromaKnowledgeBase
from offline import datasets as ds
from offline.datasets import Query
from offline.kbs import build_kb
from offline.router_training import chinese_kb

WEIGHTS = np.round(np.linspace(0.0, 1.0, 21), 2)
ROWS = Path(tempfile.gettempdir()) / "tandem_cascade_rows.pkl"
FLOORS = np.round(np.arange(0.0, 0.81, 0.05), 2)  # the primary top score a message needs to be escalated


def demo_split(name: str) -> list[Query]:
    return [Query(r["query"], int(r["in_scope"] != "True"), r["answer_id"], f"demo-{name}")
            for r in ds.read_csv(ds.EVAL_DIR / "demo_shop.csv") if r["split"] == name]


def searched(kb: ChromaKnowledgeBase, queries: list[Query]) -> list[dict]:
    """Each English message's best answers in MiniLM's space and in the cascade's (the product's search in both)."""
    snap = kb._snap
    assert snap.cascade is not None, "set TANDEM_CASCADE_ENCODER=mpnet"
    rows = []
    for q in queries:
        text = kb.search_text(q.text)
        if kb.space_for(text):  # another language's space: the cascade never applies
            continue
        primary = snap.index.search(text, kb.encoder.encode_query(text), k=POOL)
        refined = snap.cascade.index.search(text, snap.cascade.encoder.encode_query(text), k=POOL)
        rows.append({"gold": q.answer_id, "in_scope": not q.needs_llm, "primary": primary, "refined": refined,
                     "margin": primary[0].score - primary[1].score if len(primary) > 1 else 1.0,
                     "top": primary[0].score, "short": within_words(text, MAX_WORDS)})
    return rows


def outcome(rows: list[dict], margin: float, weight: float, floor: float = 0.0) -> dict:
    """In-scope top-1 and the share of all messages escalated, with the cascade at (margin, weight, floor)."""
    right, escalated = [], []
    for row in rows:
        escalate = row["margin"] < margin and row["top"] >= floor and row.get("short", True)
        top = fuse(row["primary"], row["refined"], weight)[0] if escalate else row["primary"][0]
        escalated.append(escalate)
        if row["in_scope"]:
            right.append(top.answer_id == row["gold"])
    return {"top1": round(float(np.mean(right)), 4), "escalation": round(float(np.mean(escalated)), 4),
            "n_in_scope": len(right), "n": len(rows)}


def choose(rows: list[dict], max_escalation: float) -> tuple[float, float, float]:
    """(margin, weight, floor): the best in-scope top-1 within the escalation budget (ties: fewer escalations, more
    MiniLM). The fused top answer is computed once per weight, then every margin and floor is a vector operation."""
    in_scope = np.array([r["in_scope"] for r in rows])
    margins = np.array([r["margin"] for r in rows])
    tops = np.array([r["top"] for r in rows])
    short = np.array([r.get("short", True) for r in rows])  # over the word cap: never escalated (as served)
    primary_right = np.array([r["primary"][0].answer_id == r["gold"] for r in rows])
    best: tuple | None = None
    for weight in WEIGHTS:
        fused_right = np.array([fuse(r["primary"], r["refined"], float(weight))[0].answer_id == r["gold"]
                                for r in rows])
        for floor in FLOORS:
            for margin in sorted({0.0, *np.round(margins, 4).tolist()}):
                escalate = (margins < margin) & (tops >= floor) & short
                share = float(escalate.mean())
                if share > max_escalation:
                    break
                top1 = float(np.where(escalate, fused_right, primary_right)[in_scope].mean())
                key = (round(top1, 6), -share, float(weight))
                if best is None or key > best[0]:
                    best = (key, float(margin), float(weight), float(floor))
    assert best is not None
    return best[1], best[2], best[3]


def search_all() -> dict[str, dict[str, list[dict]]]:
    """Every dev and held-out message of both KBs searched in both spaces."""
    if get_settings().cascade_encoder != "mpnet":
        raise SystemExit("run with TANDEM_CASCADE_ENCODER=mpnet")
    with tempfile.TemporaryDirectory(prefix="tandem-cascade-") as tmp:
        work = Path(tmp)
        files = ds.write_kb_csvs(work / "bitext", ds.bitext_answers(),
                                 [(q.text, q.answer_id) for q in ds.bitext("train")])
        bitext = build_kb(*files, tune=True)
        demo = chinese_kb(work / "demo")
        sets = {"bitext": (bitext, ds.bitext_dev(), ds.bitext_heldout()),
                "demo": (demo, demo_split("dev"), demo_split("heldout"))}
        rows = {name: {"dev": searched(kb, dev), "heldout": searched(kb, held)}
                for name, (kb, dev, held) in sets.items()}
    with ROWS.open("wb") as handle:  # for a re-choice without searching again (--rows)
        pickle.dump(rows, handle)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("reports/cascade_fit.json"))
    parser.add_argument("--max-escalation", type=float, default=0.4)
    parser.add_argument("--rows", action="store_true", help=f"Choose again from the searches kept in {ROWS}.")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.rows:
        with ROWS.open("rb") as handle:
            rows = pickle.load(handle)
    else:
        rows = search_all()
    pooled_dev = [r for name in rows for r in rows[name]["dev"]]
    margin, weight, floor = choose(pooled_dev, args.max_escalation)
    report: dict = {"date": date.today().isoformat(), "margin": margin, "weight": weight, "floor": floor,
                    "max_escalation": args.max_escalation, "pool": POOL}
    for name in rows:
        for split in ("dev", "heldout"):
            report[f"{name}_{split}"] = {"minilm": outcome(rows[name][split], 0.0, 1.0),
                                         "cascade": outcome(rows[name][split], margin, weight, floor)}
    report["pooled_dev"] = {"minilm": outcome(pooled_dev, 0.0, 1.0),
                            "cascade": outcome(pooled_dev, margin, weight, floor)}
    report["seconds"] = round(time.perf_counter() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
