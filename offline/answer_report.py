"""Scores of the final answers `make eval` collects (offline/answer_eval.py), their per-set report and README table.

One message's way through the chain is an :class:`Outcome`; :func:`score` turns it into a record (what the customer
read, and what is wrong with it), with the same functions the chain verifies rewrites with (chains/verify.py):

- every message of an answerable set: is the top answer the right one (the draft's first source);
- text an LLM wrote that the customer reads (a verified rewrite, an LLM answer): its defects (echo, narration,
  refusal of an answerable message, repetition, cut-off, wrong language, unsupported claim), and for an answerable
  message the key-fact recall against the right KB answer, a contradiction of it counting as a defect;
- a served rewrite: is it worse than its draft (a draft fact lost or contradicted, or any defect).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean, median
from typing import Any

from chains.answers import DEFAULT_BRAND
from chains.schema import CLARIFY_SERVED
from chains.verify import defects, fact_report, without_citations

LLM_TEXT = ("rewrite", "llm")  # served kinds whose text an LLM wrote
DRAFTS = ("draft", "draft_with_caveat")  # served kinds that are the KB's draft
SETTLED = ("guard", "cache", "tool")  # decided before any KB answer was looked up: no right answer to score

# issue 39's Targets, measured on the held-out parts with the real engine
TARGETS: dict[str, tuple[str, Any]] = {
    "right_drafts_rewritten": ("≤ 2 %", lambda v: v <= 0.02),
    "worse_rewrites_served": ("0", lambda v: v == 0),
    "defect_rate": ("≤ 2 %", lambda v: v <= 0.02),
    "key_fact_recall": ("≥ 0.9", lambda v: v >= 0.9),
    "unsupported_claims_served": ("0", lambda v: v == 0),
}


@dataclass
class Outcome:
    """What the chain did with one message, and what the eval knows about it."""

    set: str
    query_id: str
    message: str
    expected: str                 # the right answer's id; "" out of scope
    in_scope: bool
    plan: str                     # small | llm | rewrite ("" when decided before the router: guard, cache, tool)
    route: str
    served: str                   # what the customer reads: draft, rewrite, llm, draft_with_caveat, human_offer, ...
    answer: str
    draft: str = ""               # the KB draft the chain made (with its citation line)
    top_answer_id: str | None = None
    finish_reason: str = "stop"
    sources: list[str] = field(default_factory=list)  # what the answer may draw on (chains.check.sources_of)
    context: list[str] = field(default_factory=list)  # the help-center text it was written from (hits, draft)
    findings: list[dict[str, Any]] = field(default_factory=list)
    first_text_ms: float | None = None
    total_ms: float = 0.0
    error: str = ""
    rejected_text: str = ""       # LLM text the chain did not serve (a rejected rewrite, a replaced answer)
    relevance: float | None = None  # the LLM answer's similarity to the message (chains.answer_fit.off_topic)
    taken_back: bool = False      # LLM text the customer saw, then replaced (TANDEM_LLM_HOLD_UNTIL_CHECKED)
    choices: list[str] = field(default_factory=list)  # served "clarify": the answer ids the customer was offered


def rejection(findings: Iterable[dict[str, Any]]) -> str | None:
    """The reason the chain gave for rejecting an LLM rewrite, when it did."""
    return next((str(f.get("detail") or "unstated") for f in findings if f.get("kind") == "rewrite_rejected"), None)


def reason_kind(detail: str) -> str:
    """The reason's kind, for counting: "dropped: path 'Account > Orders' of the draft" -> "dropped"."""
    return detail.split(":", 1)[0].strip() or detail


def worse_than_draft(draft: str, rewrite: str, found: list[dict[str, str]]) -> list[str]:
    """Why a served rewrite is worse than its draft (empty: it is not): a draft fact lost or contradicted, or a
    defect (``found``, the rewrite's defects as scored)."""
    report = fact_report(without_citations(draft), without_citations(rewrite), DEFAULT_BRAND.shop)
    why = [f"lost {f.kind} '{f.text}'" for f in report.missing]
    why += [f"contradicts with {f.kind} '{f.text}'" for f in report.contradictions]
    return why + [f"{d['kind']}: {d['detail']}" for d in found]


def score(o: Outcome, reference: str | None) -> dict[str, Any]:
    """The outcome as a record a person can read, with its scores. ``reference``: the right KB answer's text
    (order number filled in as the product fills it), None out of scope."""
    record: dict[str, Any] = {
        "set": o.set, "query_id": o.query_id, "message": o.message, "expected": o.expected or None,
        "in_scope": o.in_scope, "plan": o.plan, "route": o.route, "served": o.served, "answer": o.answer,
        "draft": o.draft if o.plan == "rewrite" else "", "top_answer_id": o.top_answer_id,
        "right": (o.top_answer_id == o.expected) if o.in_scope and o.served not in SETTLED else None,
        "findings": o.findings, "rejected": rejection(o.findings), "rejected_text": o.rejected_text,
        "recall": None, "missing": [], "defects": [],
        "worse_than_draft": None, "relevance": o.relevance, "first_text_ms": o.first_text_ms, "total_ms": o.total_ms,
        "taken_back": o.taken_back, "error": o.error, **({"choices": o.choices} if o.choices else {})}
    if o.served not in LLM_TEXT:
        return record
    found = [{"kind": d.kind, "detail": d.detail} for d in defects(
        o.answer, message=o.message, finish_reason=o.finish_reason, answerable=o.in_scope, sources=o.sources,
        context=o.context)]
    if o.in_scope and reference:
        facts = fact_report(reference, without_citations(o.answer), DEFAULT_BRAND.shop)
        record["recall"], record["missing"] = facts.recall, [f.text for f in facts.missing]
        found += [{"kind": "contradiction", "detail": f"{f.kind} '{f.text}'"} for f in facts.contradictions]
    record["defects"] = found
    if o.served == "rewrite":
        record["worse_than_draft"] = worse_than_draft(o.draft, o.answer, found)
    return record


def share(count: int, of: int) -> dict[str, Any]:
    return {"rate": round(count / of, 4) if of else None, "count": count, "of": of}


def _p50(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(median(kept), 1) if kept else None


def group_stats(records: list[dict[str, Any]]) -> dict[str, Any]:
    """n, right-answer rate, key-fact recall, defect rate by kind and first-text latency of a group of records."""
    answerable = [r for r in records if r["right"] is not None]
    llm = [r for r in records if r["served"] in LLM_TEXT]
    recalls = [r["recall"] for r in llm if r["in_scope"] and r["recall"] is not None]
    kinds = Counter(d["kind"] for r in llm for d in r["defects"])
    return {"n": len(records), "n_answerable": sum(bool(r["in_scope"]) for r in records),
            "right_answer": share(sum(bool(r["right"]) for r in answerable), len(answerable)),
            "n_llm_text": len(llm), "key_fact_recall": round(mean(recalls), 4) if recalls else None,
            "n_recall": len(recalls), "defects": share(sum(bool(r["defects"]) for r in llm), len(llm)),
            "defects_by_kind": dict(sorted(kinds.items())),
            "first_text_p50_ms": _p50(r["first_text_ms"] for r in records),
            "total_p50_ms": _p50(r["total_ms"] for r in records)}


def set_report(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One set's figures: the whole set, then by served kind and by plan, and the rewrite measures."""
    right = [r for r in records if r["in_scope"] and r["right"]]
    rewrites = [r for r in records if r["plan"] == "rewrite"]
    rejected = [r["rejected"] for r in rewrites if r["rejected"]]
    served = [r for r in records if r["served"] in LLM_TEXT]
    answers = [r for r in records if r["plan"] == "llm" and r["served"] not in SETTLED]
    replaced = [r for r in answers if r["served"] not in LLM_TEXT]
    out_of_scope = [r for r in records if not r["in_scope"]]
    by = lambda key: {value: group_stats([r for r in records if r[key] == value])  # noqa: E731
                      for value in sorted({r[key] or "-" for r in records})}
    return {**group_stats(records),
            "right_drafts_rewritten": share(sum(r["plan"] == "rewrite" for r in right), len(right)),
            "rewrite_rejected": share(len(rejected), len(rewrites)),
            "rewrite_rejected_by_reason": dict(Counter(reason_kind(d) for d in rejected).most_common()),
            "worse_rewrites_served": sum(bool(r["worse_than_draft"]) for r in served if r["served"] == "rewrite"),
            "unsupported_claims_served": sum(d["kind"] == "unsupported" for r in served for d in r["defects"]),
            # LLM answers the chain did not serve (a draft with a caveat, an offer of a person), by what it found
            "llm_answers_replaced": share(len(replaced), len(answers)),
            "llm_answers_replaced_by_finding": dict(Counter(f.get("kind", "?") for r in replaced
                                                            for f in r["findings"]).most_common()),
            # LLM answers the customer saw in part before they were replaced (none when held until checked whole)
            "llm_answers_taken_back": share(sum(bool(r.get("taken_back")) for r in answers), len(answers)),
            "out_of_scope_served_a_draft": share(sum(r["served"] in DRAFTS for r in out_of_scope), len(out_of_scope)),
            # an LLM answer's first text (a rewrite shows its draft at once, so its first text says nothing)
            "llm_first_text_p50_ms": _p50(r["first_text_ms"] for r in records if r["plan"] == "llm"),
            # the small tier asked which help-center answer is meant (chains/tiers/small.py), and how often the right
            # one was among the choices it offered (in-scope messages)
            "asked_which": share(len(asked := [r for r in records if r["served"] == CLARIFY_SERVED]), len(records)),
            "right_among_choices": share(sum(r["expected"] in r.get("choices", ()) for r in asked if r["in_scope"]),
                                         sum(1 for r in asked if r["in_scope"])),
            "by_served": by("served"), "by_plan": by("plan")}


_SOURCE = {"defect_rate": "defects"}  # a target's figure in a set report, where its name differs


def measure(report: dict[str, Any], key: str) -> float | None:
    """A target's value in one set's report."""
    value = report.get(_SOURCE.get(key, key))
    return value.get("rate") if isinstance(value, dict) else value


def met(key: str, values: Iterable[float | None]) -> bool | None:
    """A target is met when every set that measures it meets it (None: no set measured it)."""
    known = [v for v in values if v is not None]
    return all(TARGETS[key][1](v) for v in known) if known else None


def summary(sets: dict[str, dict[str, Any]], pooled: dict[str, Any]) -> dict[str, Any]:
    """Each target: its value per set and over all sets, and whether it is met."""
    return {key: {"per_set": {name: measure(s, key) for name, s in sets.items()}, "all": measure(pooled, key),
                  "target": TARGETS[key][0], "met": met(key, (measure(s, key) for s in sets.values()))}
            for key in TARGETS}


ROWS = (("right_drafts_rewritten", "right drafts rewritten"),
        ("worse_rewrites_served", "rewrites served that are worse than their draft"),
        ("defect_rate", "customer-visible defects in served LLM answers"),
        ("key_fact_recall", "key-fact recall of served LLM answers to answerable messages"),
        ("unsupported_claims_served", "unsupported claims served"))


def _pct(part: dict[str, Any]) -> str:
    return "–" if not part["of"] else f"{100 * part['rate']:.1f} % ({part['count']}/{part['of']})"


def _cell(key: str, report: dict[str, Any]) -> str:
    if key in ("right_drafts_rewritten", "defect_rate"):
        return _pct(report[_SOURCE.get(key, key)])
    if key == "key_fact_recall":
        value = report["key_fact_recall"]
        return "–" if value is None else f"{value:.3f} (n={report['n_recall']})"
    return str(report[key])


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _yes(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "**no**")


def markdown(report: dict[str, Any]) -> str:
    """The README table of the answers section: targets per set, then every set by what the customer read."""
    sets, pooled = report["sets"], report["all"]
    labels = [s["label"] for s in sets.values()]
    scope = ", ".join(f"{s['label']} ({s['n']} messages, {s['kb']})" for s in sets.values())
    lines = [f"Answer quality, measured {report['date']} by `make eval` (alone: `tandem eval --answers-only`): every "
             f"message through the whole chain with the real vLLM serving **{report['model']}** (at most "
             f"{report['max_tokens']} tokens, the model's default sampling), each answered fresh: no response cache, "
             f"no rate limit, no load gate. Sets: {scope}. A right answer is the draft's top source; LLM text the "
             "customer reads (a verified rewrite or an LLM answer) is scored for defects and, answering an "
             "answerable message, for the right KB answer's key facts (a contradiction of one counts as a defect). "
             f"Per-message records: `reports/answers.jsonl`. Took {report['seconds'] / 60:.0f} min."
             + (f" Quick look: at most {report['limit']} messages per set." if report.get("limit") else ""), "",
             f"| measure | {' | '.join(labels)} | all | target | met |", "|---" * (len(labels) + 4) + "|"]
    for key, label in ROWS:
        cells = [_cell(key, s) for s in sets.values()] + [_cell(key, pooled)]
        lines.append(f"| {label} | {' | '.join(cells)} | {TARGETS[key][0]} | {_yes(report['summary'][key]['met'])} |")
    cells = [_ms(s["llm_first_text_p50_ms"]) for s in [*sets.values(), pooled]]
    lines.append(f"| first text of an LLM answer, p50 (ms, one client) | {' | '.join(cells)} | "
                 "≤ 1,500 in `make bench` | – |")
    lines += ["", "By set and by what the customer read:", "",
              "| set | served | n | right answer | key-fact recall | defective LLM answers | defects by kind | "
              "first text p50 (ms) | whole answer p50 (ms) |", "|---|---|---|---|---|---|---|---|---|"]
    for s in sets.values():
        for kind, g in s["by_served"].items():
            found = ", ".join(f"{k} {v}" for k, v in g["defects_by_kind"].items()) or "–"
            recall = "–" if g["key_fact_recall"] is None else f"{g['key_fact_recall']:.3f}"
            lines.append(f"| {s['label']} | {kind} | {g['n']} | {_pct(g['right_answer'])} | {recall} | "
                         f"{_pct(g['defects'])} | {found} | {_ms(g['first_text_p50_ms'])} | {_ms(g['total_p50_ms'])} |")
    rejected = [f"{s['label']} {_pct(s['rewrite_rejected'])}"
                + (f" ({', '.join(f'{k} {v}' for k, v in s['rewrite_rejected_by_reason'].items())})"
                   if s["rewrite_rejected_by_reason"] else "") for s in sets.values()]
    replaced = [f"{s['label']} {_pct(s['llm_answers_replaced'])}"
                + (f" ({', '.join(f'{k} {v}' for k, v in s['llm_answers_replaced_by_finding'].items())})"
                   if s["llm_answers_replaced_by_finding"] else "") for s in sets.values()]
    lines += ["", "Rewrites the chain rejected (the customer got the draft), by reason: " + "; ".join(rejected) + ".",
              "", "LLM answers the chain replaced (by the draft with a caveat or an offer of a person), by what it "
              "found: " + "; ".join(replaced) + ".", "",
              "LLM answers the customer saw in part before they were replaced (TANDEM_LLM_HOLD_UNTIL_CHECKED="
              f"{str(report.get('hold', True)).lower()}): "
              + "; ".join(f"{s['label']} {_pct(s['llm_answers_taken_back'])}" for s in sets.values()) + ".", "",
              "Out-of-scope messages answered with a KB draft: "
              + "; ".join(f"{s['label']} {_pct(s['out_of_scope_served_a_draft'])}" for s in sets.values()) + "."]
    if any("asked_which" in s for s in sets.values()):
        lines += ["", "The small tier asked \"which one?\" (its best two answers too close to serve the top one): "
                  + "; ".join(f"{s['label']} {_pct(s['asked_which'])}" for s in sets.values() if "asked_which" in s)
                  + ". The right answer among its choices (in-scope messages): "
                  + "; ".join(f"{s['label']} {_pct(s['right_among_choices'])}" for s in sets.values()
                              if "right_among_choices" in s) + "."]
    labelled = [(s["label"], s["not_answering"]) for s in sets.values() if "not_answering" in s]
    if labelled:
        lines += ["", "Served answers that do not answer the question, by a person's labels "
                  "(knowledge/eval/answers_the_question.csv; target 0): "
                  + "; ".join(f"{label} {_pct(n['served'])} (among served LLM text {_pct(n['llm_text'])}), "
                              f"{n['unlabelled']} unlabelled" for label, n in labelled) + "."]
    return "\n".join(lines)


def not_answering(records: Iterable[dict[str, Any]], labels: dict[tuple[str, str], str]) -> dict[str, Any]:
    """Served answers that do not answer the question, by a person's labels (knowledge/eval/answers_the_question.csv,
    keyed by query id and answer text): those labelled "no" among all served answers and among served LLM text (what
    the answer check governs), and how many served answers carry no label (their text changed since labelling). The
    offer of a person and the question "which one?" are no answers: they are counted apart (set_report)."""
    served = [r for r in records if r["served"] not in ("human_offer", "handoff", CLARIFY_SERVED) and r["answer"].strip()]
    label = [labels.get((r["query_id"], r["answer"])) for r in served]
    llm = [lab for r, lab in zip(served, label, strict=True) if r["served"] in LLM_TEXT]
    return {"served": share(label.count("no"), len(served) - label.count(None)),
            "llm_text": share(llm.count("no"), len(llm) - llm.count(None)),
            "unlabelled": label.count(None), "target": "0"}
