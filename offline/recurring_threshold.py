"""Choose the similarity at which LLM-bound messages group (ops/recurring.py), on the hand-written DEVELOPMENT sets
only: the Bitext dev set, the demo shop's dev split and the Chinese train/valid splits. Never the held-out sets.

Two messages are the same question when they carry the same answer_id (paraphrases a person wrote of one question);
every out-of-scope message is a question of its own. The messages are grouped as ops/recurring.py groups them
(greedy, in a seeded random order standing in for arrival order), and each threshold is scored by pairs: precision
(pairs grouped together that are the same question), recall (same-question pairs grouped together), F0.5 (precision
weighs more: a merged group would prepare one answer for two questions) and how many out-of-scope messages were
merged with another message.

    python -m offline.recurring_threshold [--seeds 5]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence

import numpy as np

from offline import datasets as ds
from ops.recurring import cluster

# MiniLM's cosines spread wide; e5's sit high for any two messages (core/encoders/e5.py), so its grid is finer.
GRIDS = {"minilm": [round(0.4 + 0.025 * i, 3) for i in range(21)],   # 0.40 .. 0.90
         "e5": [round(0.8 + 0.01 * i, 3) for i in range(19)]}        # 0.80 .. 0.98


def pair_scores(labels: Sequence[str], groups: list[list[int]]) -> dict[str, float]:
    """Pairwise precision, recall and F0.5 of ``groups`` against ``labels`` ("" = a question of its own)."""
    label = [lab or f"own-{i}" for i, lab in enumerate(labels)]
    together = both = 0
    for rows in groups:
        for a, i in enumerate(rows):
            for j in rows[a + 1:]:
                together += 1
                both += label[i] == label[j]
    counts: dict[str, int] = {}
    for lab in label:
        counts[lab] = counts.get(lab, 0) + 1
    same = sum(n * (n - 1) // 2 for n in counts.values())
    precision = both / together if together else 1.0
    recall = both / same if same else 1.0
    f05 = 1.25 * precision * recall / (0.25 * precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f05": f05, "oos_merged": _merged_oos(labels, groups)}


def _merged_oos(labels: Sequence[str], groups: list[list[int]]) -> float:
    """Share of out-of-scope messages grouped with any other message."""
    oos = [i for i, lab in enumerate(labels) if not lab]
    if not oos:
        return 0.0
    size = {r: len(rows) for rows in groups for r in rows}
    return sum(size[i] > 1 for i in oos) / len(oos)


def sweep(queries: list[ds.Query], vectors: np.ndarray, seeds: int,
          grid: Sequence[float]) -> dict[float, dict[str, float]]:
    labels = [q.answer_id if not q.needs_llm else "" for q in queries]
    table: dict[float, dict[str, float]] = {}
    for threshold in grid:
        runs = []
        for seed in range(seeds):
            order = list(range(len(queries)))
            random.Random(seed).shuffle(order)
            groups = [[order[r] for r in rows] for rows in cluster(vectors[order], threshold)]
            runs.append(pair_scores(labels, groups))
        table[threshold] = {k: round(float(np.mean([r[k] for r in runs])), 4) for k in runs[0]}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    from core.encoders import load_encoder
    from core.settings import get_settings

    sets = {"bitext-dev": (ds.bitext_dev(), "minilm"), "demo-shop dev": (ds.demo_shop_dev(), "minilm"),
            "zh train+valid": (ds.chinese("train") + ds.chinese("valid"), "e5")}
    report: dict[str, dict[float, dict[str, float]]] = {}
    for name, (queries, encoder_name) in sets.items():
        encoder = load_encoder(encoder_name, settings=get_settings())
        vectors = np.asarray(encoder.encode_queries([q.text for q in queries]), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        report[name] = sweep(queries, vectors, args.seeds, GRIDS[encoder_name])
        print(f"\n{name} ({encoder_name}): {len(queries)} messages")
        print("threshold  precision  recall  F0.5   out-of-scope merged")
        for threshold, row in report[name].items():
            print(f"{threshold:9.3f}  {row['precision']:9.3f}  {row['recall']:6.3f}  {row['f05']:5.3f}  "
                  f"{row['oos_merged']:6.3f}")
    english = {t: (report["bitext-dev"][t]["f05"] + report["demo-shop dev"][t]["f05"]) / 2 for t in GRIDS["minilm"]}
    zh = report["zh train+valid"]
    print(json.dumps({"minilm (mean F0.5 of the two English dev sets)": max(english, key=lambda t: english[t]),
                      "e5 (F0.5 of the Chinese train+valid)": max(zh, key=lambda t: zh[t]["f05"])}))

if __name__ == "__main__":
    main()
