"""How the answer check's "does it answer the question" part (chains.answer_fit.misses_the_question: off topic, or a
named price, colour or size not spoken to) judges the served answers a person labelled
(knowledge/eval/answers_the_question.csv, the demo shop's held-out answers of a `make eval` run).

For each labelled answer: the message's similarity to it under the encoder (the answer embedded as a passage, as the
LLM tier embeds an answer), then the check. Prints, for LLM text (what the check governs) and for drafts (what it
would do to them; a rewrite's draft is checked so), how many answers labelled "no" it lets through and how many
labelled "yes" it rejects.

    .venv/bin/python scripts/relevance_labels.py
"""

from __future__ import annotations

import csv
from collections import Counter

import numpy as np

from chains.answer_fit import misses_the_question
from chains.verify import without_citations
from core.encoders import load_encoder
from core.settings import get_settings
from offline.datasets import EVAL_DIR

LABELS = EVAL_DIR / "answers_the_question.csv"


def main() -> None:
    settings = get_settings()
    encoder = load_encoder(settings.encoder, settings=settings)
    counts: Counter[tuple[str, str, bool]] = Counter()
    for row in csv.DictReader(LABELS.open(encoding="utf-8")):
        answer = without_citations(row["answer"])
        query, passage = encoder.encode_queries([row["message"]])[0], encoder.encode_answer(answer)
        similarity = float(query @ passage / (np.linalg.norm(query) * np.linalg.norm(passage)))
        missed = misses_the_question(row["message"], answer, similarity, encoder.name)
        kind = "LLM text" if row["served"] in ("llm", "rewrite") else "drafts"
        counts[(kind, row["answers_the_question"], missed is not None)] += 1
        if missed is not None or row["answers_the_question"] == "no":
            print(f"{row['query_id']} {row['answers_the_question']:3} {'REJECTED' if missed else 'passed  '} "
                  f"{similarity:.2f} {row['message'][:60]!r} {missed.detail if missed else ''}")
    for kind in ("LLM text", "drafts"):
        no, yes = counts[(kind, "no", False)] + counts[(kind, "no", True)], \
            counts[(kind, "yes", False)] + counts[(kind, "yes", True)]
        print(f"{kind} (encoder {encoder.name}): labelled no let through {counts[(kind, 'no', False)]} of {no}; "
              f"labelled yes rejected {counts[(kind, 'yes', True)]} of {yes}")


if __name__ == "__main__":
    main()
