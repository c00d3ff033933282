"""Experiment: which prompt shape gives fewer customer-visible defects and fewer rejected rewrites?

Runs the answers section of `make eval` on the demo shop's *development* split (never the held-out one) with one
prompt shape at a time, the model TANDEM_LLM_MODEL selects, and prints each run's figures:

- ``labelled-top1`` (the product's, chains/answers.py ``llm_messages``): one user turn holding "Help-center
  context:" (the top three answers, or for a rewrite only its draft's), "Draft answer to improve (keep its
  facts):", and the message inside a ``<<< >>>`` fence.
- ``labelled`` (the shape before 2026-12-04): the same, but a rewrite also sees the runners-up.
- ``system-turn`` (``llm_messages_system_turn``): the customer's message is the user turn as written; the
  help-center text comes in a system turn of its own before it; a rewrite sees only its draft.

Measured 2026-12-04 with Qwen2.5-0.5B on the 140 development messages: LLM answers served (they passed every
check) 5 of 30 with either labelled shape, 2 of 30 with system-turn; every rewrite was rejected with all three.

- ``brief``: the product's shape asking for "one or two short sentences, at most 30 words" instead of "at most
  three short sentences", to bring a held answer's first text sooner.

Measured 2026-12-06, same model and messages, one after the other on a quiet machine: LLM-route first text p50
2,658 ms (product) against 2,729 ms (brief); LLM texts served 3 against 5 of 24 LLM answers plus 5 rewrites, no
defect in either; answers replaced 21 against 20 of 24. No gain in time: a failing answer is stopped at its first
bad sentence already, and most answers are one sentence either way. The product's wording stays.

Usage (about 8 minutes a shape on 2 cores with Qwen2.5-0.5B):
    TANDEM_LLM_MODEL=qwen2.5-0.5b .venv/bin/python scripts/prompt_shape_experiment.py [SHAPE ...]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from chains import answers
from core.settings import get_settings
from offline.answer_eval import run_answer_eval
from tandem.llm_server import eval_endpoint

PRODUCT_SHAPE = answers.llm_messages


def labelled(query: str, hits: Sequence[Any], history: Sequence[dict[str, str]],
             draft: str | None = None, **kwargs: Any) -> list[dict[str, str]]:
    """The product's shape, but a rewrite sees the top three answers (the runners-up too), as before."""
    return PRODUCT_SHAPE(query, hits, history, draft, rewrite_context=3, **kwargs)


BRIEF_LIMIT = "in at most three short sentences"


def brief(query: str, hits: Sequence[Any], history: Sequence[dict[str, str]],
          draft: str | None = None, **kwargs: Any) -> list[dict[str, str]]:
    """The product's shape, with the system prompt asking for one or two sentences of at most 30 words: a held
    answer reaches the customer when it is finished, so fewer tokens are a sooner first text."""
    messages = PRODUCT_SHAPE(query, hits, history, draft, **kwargs)
    shorter = "in one or two short sentences, at most 30 words"
    return [{**m, "content": m["content"].replace(BRIEF_LIMIT, shorter)} if m["role"] == "system" else m
            for m in messages]


Shape = Callable[[str, Sequence[Any], Sequence[dict[str, str]], str | None], list[dict[str, str]]]
SHAPES: dict[str, Shape] = {"labelled-top1": PRODUCT_SHAPE, "labelled": labelled,
                            "system-turn": answers.llm_messages_system_turn, "brief": brief}


def main(shapes: list[str]) -> None:
    results = {}
    for shape in shapes:
        answers.llm_messages = SHAPES[shape]  # type: ignore[assignment]  # the chain reads it from the module
        log = lambda line: print(line, file=sys.stderr)  # noqa: E731
        report = run_answer_eval(["demo-dev"], log=log, endpoint=eval_endpoint(get_settings(), log))
        figures = report["sets"]["demo-dev"]
        results[shape] = {"model": report["model"], **{k: figures.get(k) for k in (
            "right_drafts_rewritten", "rewrite_rejected", "rewrite_rejected_by_reason", "worse_rewrites_served",
            "defects", "defects_by_kind", "key_fact_recall", "n_llm_text", "llm_answers_replaced",
            "llm_answers_replaced_by_finding", "unsupported_claims_served", "llm_first_text_p50_ms")}}
        print(json.dumps({shape: results[shape]}, indent=1, ensure_ascii=False), flush=True)
    answers.llm_messages = PRODUCT_SHAPE


if __name__ == "__main__":
    main(sys.argv[1:] or list(SHAPES))
