"""Fit the answer-relevance floors of chains/answer_fit.py (RELEVANCE_FLOOR) on development messages only.

For each in-scope development message, the similarity of the message to its right KB answer (the answer embedded
as a passage, as the LLM tier embeds an answer) and to a KB answer of another question, and whether they share a
content word. Prints, per floor, the share of right answers the off-topic check would flag (keep it near 1 %) and
the share of other answers it would catch. English: the demo shop's dev split (base MiniLM) and the Bitext
development set (MiniLM tuned on the Bitext FAQ); Chinese: the Chinese set's train and valid splits (multilingual
e5). Held-out messages are never read.

    .venv/bin/python scripts/relevance_floor.py
"""

from __future__ import annotations

import csv
import random
import tempfile
from pathlib import Path

import numpy as np

from chains.verify import _content_words, _stem, unanswered_slot
from offline import datasets as ds
from offline.answer_eval import EVAL_SETS, build_kb, read_messages, references


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="relevance-"))
    english = [(m.text, m.expected) for m in read_messages(EVAL_SETS["demo-dev"]) if m.in_scope]
    with ds.CHINESE.open(newline="", encoding="utf-8-sig") as handle:
        chinese = [(r["query"], r["answer_id"]) for r in csv.DictReader(handle)
                   if r["split"] in ("train", "valid") and r.get("in_scope") == "True"]
    bitext = [(q.text, q.answer_id) for q in ds.bitext_dev() if not q.needs_llm]
    demo = build_kb("demo", work, lambda line: None)
    report(demo, references("demo"), [("English, demo dev", english, (0.1, 0.15, 0.2, 0.25, 0.3)),
                                      ("Chinese, train+valid", chinese, (0.8, 0.82, 0.84, 0.86))])
    report(build_kb("bitext", work, lambda line: None), references("bitext"),
           [("English, Bitext dev", bitext, (0.1, 0.15, 0.2, 0.25, 0.3))])


def report(kb, refs: dict[str, str], sets) -> None:  # noqa: ANN001 - a script
    rng = random.Random(0)

    def similarity(message: str, answer: str) -> float:
        encoder = kb.encoder_for(message)
        a, b = encoder.encode_queries([message])[0], encoder.encode_answer(answer)
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    def shares_a_word(message: str, answer: str) -> bool:
        return bool({_stem(w) for w in _content_words(message)} & {_stem(w) for w in _content_words(answer)})

    for label, pairs, floors in sets:
        rows = []
        for text, expected in pairs:
            others = [i for i in refs if i != expected and i.startswith("zh_") == expected.startswith("zh_")]
            other = rng.choice(others)
            rows.append((similarity(text, refs[expected]), shares_a_word(text, refs[expected]),
                         similarity(text, refs[other]), shares_a_word(text, refs[other]),
                         bool(unanswered_slot(text, refs[expected])), bool(unanswered_slot(text, refs[other]))))
        table = np.array(rows, dtype=float)
        print(f"{label}: {len(rows)} messages (encoder {kb.encoder_for(pairs[0][0]).name})")
        for floor in floors:
            right = ((table[:, 0] < floor) & (table[:, 1] == 0)).mean()
            other = ((table[:, 2] < floor) & (table[:, 3] == 0)).mean()
            print(f"  floor {floor:.2f}: right answers flagged {right:.3f}, other answers caught {other:.3f}")
        slot_right, slot_other = int(table[:, 4].sum()), int(table[:, 5].sum())
        print(f"  slot check (a price or size named and not spoken to): right answers flagged {slot_right}, "
              f"other answers caught {slot_other}")


if __name__ == "__main__":
    main()
