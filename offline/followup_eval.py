"""Predicted follow-ups (issue 42, part 3): would the customer's next message have been among the suggestions?

chains/followups.py learns from the request log which answer customers ask for after each answer. This measures
that model on hand-written conversations with the demo shop (knowledge/eval/demo_sessions.csv): it is fitted on
the dev sessions and replayed on the held-out sessions, which are for reporting only. At every transition (turn t
to turn t+1 of a session) the model suggests up to 3 answers from turn t's state, as the product would offer them
(probability at least chains.followups.MIN_SHARE), and the suggestion hits when turn t+1's labelled answer is the
first one (top-1) or among them (top-3).

- Hit rates are over the next turns that have an answer (the ones a suggestion could serve), and also as a share
  of all next turns (an out-of-scope next message is a miss there: no suggestion answers it).
- The model backs off from a state to its KB category (chains/followups.py); ``no category level`` is the same
  model without it, to show what that level adds. ALPHA and BETA were chosen on the dev sessions alone, by
  leave-one-session-out (:func:`dev_cross_validation`, also in the report).
- The baseline is popularity: the model's own backoff alone (every answer's overall share as a follow-up in the dev
  sessions; the answer just read left out, as the model leaves it out). It shows what the transitions add.
- ``labelled``: a turn's state is its label (its answer id, or ``route:llm`` when out of scope), i.e. what a
  perfect product would have served. ``routed`` (unless --no-routed): the state is what the shipped router and the
  demo KB would have served (state_of's rule: the top hit when the small tier answers or the LLM rewrites a draft,
  else the route), in fitting and in replay, since the log the product fits on holds served answers, not labels.
  The next turn is scored against its label either way: it is what the customer wanted.

    python -m offline.followup_eval [--out reports/followups.json] [--no-routed]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from chains.followups import ALPHA, BETA, MIN_SHARE, ROUTE_STATE, FollowupModel
from offline import datasets as ds

SESSIONS = ds.EVAL_DIR / "demo_sessions.csv"
DEFAULT_OUT = Path("reports") / "followups.json"
LLM_STATE = ROUTE_STATE + "llm"   # an out-of-scope message: the product sends it to the LLM
K = 3                             # suggestions shown after an answer


@dataclass(frozen=True)
class Message:
    session_id: str
    turn: int
    text: str
    answer_id: str  # the answer a person would pick; "" out of scope


def read_sessions(split: str) -> list[list[Message]]:
    """The sessions of one split, each its messages in turn order. Fitting reads ``dev`` only; ``heldout`` is read
    by the report alone."""
    sessions: dict[str, list[Message]] = {}
    for row in ds.read_csv(SESSIONS):
        if row["split"] == split:
            sessions.setdefault(row["session_id"], []).append(
                Message(row["session_id"], int(row["turn"]), row["query"], row["answer_id"].strip()))
    return [sorted(messages, key=lambda m: m.turn) for messages in sessions.values()]


def demo_categories() -> dict[str, str]:
    """The English demo answers (the only follow-ups the model may suggest) and their KB categories."""
    from knowledge.demo_kb import DEMO_DIR

    return {r["answer_id"]: r["category"] for r in ds.read_csv(DEMO_DIR / "answers.csv")}


def demo_answer_ids() -> set[str]:
    return set(demo_categories())


def labelled_states(session: Sequence[Message]) -> list[str]:
    return [m.answer_id or LLM_STATE for m in session]


def replay(model: FollowupModel, states: Sequence[Sequence[str]], sessions: Sequence[Sequence[Message]]) -> dict:
    """Top-1 and top-3 hits of the model's suggestions after each turn against the next turn's label."""
    transitions = answerable = top1 = top3 = 0
    for session_states, session in zip(states, sessions):
        for t in range(len(session) - 1):
            transitions += 1
            wanted = session[t + 1].answer_id
            if not wanted:
                continue
            answerable += 1
            suggested = [answer for answer, _ in model.predict(session_states[t], k=K, min_share=MIN_SHARE)]
            top1 += suggested[:1] == [wanted]
            top3 += wanted in suggested
    share = lambda n, d: round(n / d, 4) if d else 0.0  # noqa: E731
    return {"transitions": transitions, "answerable": answerable, "top1": share(top1, answerable),
            "top3": share(top3, answerable), "top1_of_all": share(top1, transitions),
            "top3_of_all": share(top3, transitions)}


def popularity(model: FollowupModel) -> FollowupModel:
    """The model without its per-state counts: predict() then ranks by the overall follow-up shares alone."""
    return FollowupModel(counts={}, overall=model.overall, transitions=model.transitions)


def compare(train: Sequence[Sequence[str]], test: Sequence[Sequence[str]], test_sessions: Sequence[Sequence[Message]],
            categories: dict[str, str]) -> dict:
    model = FollowupModel.fit(train, known=categories, categories=categories)
    flat = FollowupModel.fit(train, known=categories)
    return {"fitted": model.summary(), "followups": replay(model, test, test_sessions),
            "no_category_level": replay(flat, test, test_sessions),
            "popularity": replay(popularity(model), test, test_sessions)}


def dev_cross_validation(dev: Sequence[Sequence[Message]], categories: dict[str, str],
                         grid: Sequence[float] = (0.5, 1.0, 2.0, 4.0, 8.0)) -> dict[str, float]:
    """Top-3 on the dev sessions, each replayed on a model fitted on the others (leave one session out), for each
    ALPHA and BETA of ``grid`` and without the category level: how the shipped pseudo-counts were chosen."""
    states = [labelled_states(s) for s in dev]
    out: dict[str, float] = {}
    for alpha, beta in [(a, b) for a in grid for b in grid] + [(ALPHA, None)]:
        hits = answerable = 0
        for i in range(len(dev)):
            model = FollowupModel.fit(states[:i] + states[i + 1:], known=categories, alpha=alpha,
                                      categories=categories if beta is not None else None, beta=beta or BETA)
            one = replay(model, [states[i]], [dev[i]])
            hits += round(one["top3"] * one["answerable"])
            answerable += one["answerable"]
        out["no category level" if beta is None else f"alpha {alpha}, beta {beta}"] = round(hits / answerable, 4)
    return out


def routed_states(sessions: Sequence[Sequence[Message]], log: Callable[[str], None]) -> tuple[list[list[str]], dict]:
    """Each message's state as the product would have logged it: the shipped router and thresholds over the demo
    KB's English answers and questions (base MiniLM, no LLM), and how often that state is the label."""
    from chains.followups import state_of
    from core.policy import Thresholds
    from core.settings import get_settings
    from knowledge.demo_kb import DEMO_DIR
    from offline.kbs import build_kb
    from offline.route_batch import batch_chain, route_record

    log("routed: the demo KB (English answers and questions, base MiniLM) and the shipped router")
    kb = build_kb(DEMO_DIR / "answers.csv", DEMO_DIR / "questions.csv", tune=False, log=log)
    texts = [m.text for session in sessions for m in session]
    chain = batch_chain(kb, texts=texts)
    thresholds = Thresholds.defaults(get_settings())
    states = []
    for session in sessions:
        records = [route_record(chain, m.text, thresholds) for m in session]
        states.append([state_of(r["route"], "rewrite" if r["rewrite"] else "",
                                [{"answer_id": r["answer_id"]}] if r["answer_id"] else []) for r in records])
    pairs = [(m.answer_id or LLM_STATE, s) for session, ss in zip(sessions, states) for m, s in zip(session, ss)]
    in_scope = [(label, s) for label, s in pairs if label != LLM_STATE]
    out = [s for label, s in pairs if label == LLM_STATE]
    agreement = {"in_scope_served_label": round(sum(label == s for label, s in in_scope) / len(in_scope), 4),
                 "out_of_scope_to_llm": round(sum(s == LLM_STATE for s in out) / len(out), 4) if out else 0.0,
                 "messages": len(pairs)}
    return states, agreement


def evaluate(routed: bool = True, log: Callable[[str], None] = print) -> dict:
    dev, heldout = read_sessions("dev"), read_sessions("heldout")
    known = demo_categories()
    report: dict = {
        "set": {split: {"sessions": len(s), "messages": sum(map(len, s)),
                        "out_of_scope": sum(not m.answer_id for x in s for m in x)}
                for split, s in (("dev", dev), ("heldout", heldout))},
        "k": K, "min_share": MIN_SHARE,
        "labelled": compare([labelled_states(s) for s in dev], [labelled_states(s) for s in heldout], heldout, known),
        "dev_cross_validation_top3": dev_cross_validation(dev, known)}
    if routed:
        states, agreement = routed_states(dev + heldout, log)
        report["routed"] = compare(states[:len(dev)], states[len(dev):], heldout, known) | {"routing": agreement}
    return report


def table(report: dict) -> str:
    """The report as a markdown table: one row per state and predictor."""
    lines = ["| states | predictor | top-1 | top-3 | top-1 of all | top-3 of all | next turns with an answer |",
             "|---|---|---|---|---|---|---|"]
    for states in ("labelled", "routed"):
        for predictor, name in (("followups", "follow-up model"), ("no_category_level", "no category level"),
                                ("popularity", "popularity")):
            if states in report:
                r = report[states][predictor]
                lines.append(f"| {states} | {name} | {r['top1']:.3f} | {r['top3']:.3f} | {r['top1_of_all']:.3f} | "
                             f"{r['top3_of_all']:.3f} | {r['answerable']} of {r['transitions']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-routed", action="store_true", help="labelled states only (no encoder or router)")
    args = parser.parse_args(argv)
    report = evaluate(routed=not args.no_routed)
    print(f"\nFollow-ups: fitted on {report['set']['dev']['sessions']} dev sessions, replayed on "
          f"{report['set']['heldout']['sessions']} held-out sessions (k={K}, min share {MIN_SHARE})\n")
    print(table(report))
    if "routed" in report:
        print(f"\nrouted states: {json.dumps(report['routed']['routing'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
