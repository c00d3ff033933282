"""`make eval`'s clarify rows: how often the clarify tier asks, and whether the right answer is among its options.

Each set is routed twice by the product's chain, clarify off (what the other rows of the report measure) and on.
A clarification counts as correct only when the right answer is among its options; the small tier's precision
with clarify on counts the messages the small tier answers and those it asks about, and a question without the
right answer among its options is a miss, as a wrong draft is. In-scope messages only, as ``correct_on_small``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from chains.schema import LLM_ROUTE, SMALL_ROUTE
from core.policy import Thresholds
from core.settings import get_settings
from offline.datasets import Query
from offline.route_batch import batch_chain, route_record


def route(kb, queries: list[Query], thresholds: Thresholds, clarify: bool) -> list[dict]:
    chain = batch_chain(kb, texts=[q.text for q in queries], clarify=clarify)
    return [route_record(chain, q.text, thresholds) for q in queries]


def clarify_report(off: list[dict], on: list[dict], queries: list[Query]) -> dict:
    """Ask rate, right answer among the options, and the small tier's precision with and without clarify."""
    ins = np.array([not q.needs_llm for q in queries])
    asked = np.array([r["route"] == "clarify" for r in on])
    offered = np.array([q.answer_id in r.get("options", []) for r, q in zip(on, queries)])
    top_right = np.array([r["answer_id"] == q.answer_id for r, q in zip(on, queries)])
    small_on = np.array([r["route"] == SMALL_ROUTE for r in on])
    small_off = np.array([r["route"] == SMALL_ROUTE for r in off])
    right_off = np.array([r["answer_id"] == q.answer_id for r, q in zip(off, queries)])
    kept = ins & (small_on | asked)
    right_on = (small_on & top_right) | (asked & offered)

    def share(mask: np.ndarray, of: np.ndarray) -> float | None:
        return round(float(mask[of].mean()), 4) if of.any() else None

    return {"n_in_scope": int(ins.sum()), "n_asked": int((asked & ins).sum()),
            "ask_rate": share(asked, ins), "oos_ask_rate": share(asked, ~ins),
            "right_among_options": share(offered, ins & asked),
            "top_answer_wrong_but_offered": int((asked & ins & offered & ~top_right).sum()),
            "small_precision_off": share(right_off, ins & small_off),
            "small_precision_on": share(right_on, kept),
            "in_scope_to_llm_on": share(np.array([r["route"] == LLM_ROUTE for r in on]), ins)}


def run_clarify_eval(kbs: dict[str, tuple[object, list[Query]]], log: Callable[[str], None] = print) -> dict:
    """``kbs``: set name -> (its KB, its held-out messages); each routed with clarify off and on, product τ."""
    default = Thresholds.defaults(get_settings())
    out = {}
    for name, (kb, queries) in kbs.items():
        log(f"clarify: {name}, routed with clarify off and on")
        out[name] = clarify_report(route(kb, queries, default, False), route(kb, queries, default, True), queries)
    return out


def clarify_markdown(report: dict, day: str) -> str:
    """The README's clarify table (rows: measures; columns: the held-out sets)."""
    names = {"heldout": "Bitext held-out (English)", "zh": "Chinese test"}
    sets = [name for name in names if name in report]

    def cell(value: float | int | None) -> str:
        return "–" if value is None else (str(value) if isinstance(value, int) else f"{value:.3f}")

    rows = [("asks (share of in-scope messages)", "ask_rate"), ("asks (share of out-of-scope messages)", "oos_ask_rate"),
            ("right answer among the options, when it asks", "right_among_options"),
            ("questions whose top answer was wrong but the right one offered", "top_answer_wrong_but_offered"),
            ("small-tier precision, clarify off", "small_precision_off"),
            ("small-tier precision, clarify on (a question without the right answer is a miss)",
             "small_precision_on"),
            ("in-scope messages sent to the LLM, clarify on", "in_scope_to_llm_on")]
    lines = [f"Clarifying questions (`TANDEM_CLARIFY=on`; measured {day} by `make eval`, held-out sets only, rule "
             "fitted on development data by scripts/clarify_fit.py; the rows above are with clarify off, the "
             "default):", "", f"| measure | {' | '.join(names[s] for s in sets)} |", "|---" * (len(sets) + 1) + "|"]
    lines += [f"| {label} | {' | '.join(cell(report[s][key]) for s in sets)} |" for label, key in rows]
    return "\n".join(lines)
