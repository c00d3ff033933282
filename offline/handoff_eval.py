"""`make eval`, section handoff_triggers: precision and recall of the handoff triggers that a message's own words start
(anger, a legal threat, a complaint about the previous answer, asking for a person, the same question again), on the
hand-written set knowledge/eval/handoff_triggers.csv.

Each message goes through :func:`chains.conversation.message_trigger`, the decision the service makes before any
answer (the rules step of the chain, then ChatService._trigger): the rules file and the switches of the settings, no
LLM, no KB. A message with ``previous`` is judged as the second turn of a conversation: the customer wrote
``previous``, the bot answered, then the customer wrote ``text``.

Splits (knowledge/eval/README.md): ``dev`` the patterns were tuned on; ``test`` was written with ``dev`` before the
patterns, and not tuned on; ``fresh`` was written after the patterns were frozen, and never tuned on.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path

from chains.conversation import REPEAT, Triggers, message_trigger, rule_skipped
from chains.rules import RuleBook

SET = Path(__file__).resolve().parent.parent / "knowledge" / "eval" / "handoff_triggers.csv"
SPLITS = ("dev", "test", "fresh")
NONE = "none"
REPORTED = ("test", "fresh")  # the splits never tuned on: the figures the results page leads with


def read_set(path: Path = SET) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def decide(rows: list[dict[str, str]], rules_path: Path, triggers: Triggers) -> list[str]:
    """The trigger each message starts (NONE for none), as the service decides it."""
    rules = RuleBook(Path(rules_path))
    rules.skip = rule_skipped(triggers)
    out = []
    for row in rows:
        history = ([{"role": "user", "content": row["previous"]}, {"role": "assistant", "content": "(an answer)"}]
                   if row["previous"] else [])
        trigger, _ = message_trigger(rules, triggers, row["text"], history)
        out.append(trigger or NONE)
    if rules.problem:
        raise ValueError(f"the rules file is not in use: {rules.problem}")
    return out


def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def scores(expected: list[str], got: list[str]) -> dict:
    """Overall (a person needed: any trigger counts) and per trigger (that trigger exactly)."""
    pairs = list(zip(expected, got))
    tp = sum(e != NONE and g != NONE for e, g in pairs)
    fp = sum(e == NONE and g != NONE for e, g in pairs)
    fn = sum(e != NONE and g == NONE for e, g in pairs)
    out: dict = {"overall": {"precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn), "tp": tp, "fp": fp,
                             "fn": fn, "n_person": sum(e != NONE for e in expected),
                             "n_no_person": sum(e == NONE for e in expected)}}
    per: dict = {}
    for trigger in sorted({*expected, *got} - {NONE}):
        t_tp = sum(e == trigger and g == trigger for e, g in pairs)
        predicted, actual = sum(g == trigger for g in got), sum(e == trigger for e in expected)
        per[trigger] = {"precision": _ratio(t_tp, predicted), "recall": _ratio(t_tp, actual), "n": actual,
                        "predicted": predicted}
    out["per_trigger"] = per
    return out


def run_handoff_eval(rules_path: Path | None = None, triggers: Triggers | None = None,
                     log: Callable[[str], None] = print, path: Path = SET) -> dict:
    """The section: per split and per language, with the settings' switches (the repeat trigger as set, off by
    default) and with the repeat trigger on (whether it could be turned on); the messages decided wrong on the
    splits never tuned on."""
    if rules_path is None or triggers is None:
        from chains.runtime import handoff_triggers
        from core.settings import get_settings

        settings = get_settings()
        rules_path = rules_path or settings.rules_path
        triggers = triggers or handoff_triggers(settings)
    rows = read_set(path)
    log(f"handoff triggers: {len(rows)} messages of {path.name} through the chain's trigger decision")
    got = decide(rows, rules_path, triggers)
    with_repeat = decide(rows, rules_path, replace(triggers, repeat=True))
    report: dict = {"date": date.today().isoformat(), "set": path.name, "n": len(rows),
                    "switches": {k: v for k, v in vars(triggers).items()}, "splits": {}, "repeat_on": {}}
    for split in (*SPLITS, "all"):
        index = [i for i, r in enumerate(rows) if split == "all" or r["split"] == split]
        expected = [rows[i]["expected"] for i in index]
        report["splits"][split] = scores(expected, [got[i] for i in index])
        report["splits"][split]["by_language"] = {
            lang: scores([rows[i]["expected"] for i in index if rows[i]["language"] == lang],
                         [got[i] for i in index if rows[i]["language"] == lang])["overall"]
            for lang in ("en", "zh")}
        repeat_scores = scores(expected, [with_repeat[i] for i in index])
        report["repeat_on"][split] = {"overall": repeat_scores["overall"],
                                      REPEAT: repeat_scores["per_trigger"].get(REPEAT)}
    report["wrong"] = [{"split": rows[i]["split"], "text": rows[i]["text"], "expected": rows[i]["expected"],
                        "got": got[i]} for i in range(len(rows))
                       if rows[i]["split"] in REPORTED and got[i] != rows[i]["expected"]]
    return report


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def markdown(report: dict) -> str:
    """The results page's table: per trigger and overall, on each split."""
    splits = report["splits"]
    lines = [f"Measured {report['date']} by `make eval` on `knowledge/eval/{report['set']}` ({report['n']} hand-written "
             "messages, English and Chinese): each message through the chain's own trigger decision (the rules file "
             "and the settings' switches; no LLM). `dev`: the patterns were tuned on it; `test`: written with `dev` "
             "before the patterns, not tuned on (but for the repeat trigger's courtesy exception); `fresh`: written "
             "after the patterns were frozen, never tuned on. "
             "Overall: a message that needs a person and starts any handoff is a hit.", "",
             "| trigger | " + " | ".join(f"{s} precision | {s} recall" for s in SPLITS) + " |",
             "|---|" + "---|---|" * len(SPLITS)]
    triggers = sorted({t for s in SPLITS for t in splits[s]["per_trigger"]})
    for trigger in triggers:
        cells = []
        for split in SPLITS:
            v = splits[split]["per_trigger"].get(trigger)
            cells += [_fmt(v["precision"]) if v else "–",
                      f"{_fmt(v['recall'])} (n={v['n']})" if v and v["n"] else "–"]
        lines.append(f"| {trigger} | " + " | ".join(cells) + " |")
    cells = []
    for split in SPLITS:
        o = splits[split]["overall"]
        cells += [f"**{_fmt(o['precision'])}**", f"**{_fmt(o['recall'])}** ({o['n_person']} need a person, "
                                                  f"{o['n_no_person']} not)"]
    lines.append("| **overall** | " + " | ".join(cells) + " |")
    lines += ["", "By language (overall precision / recall):", "", "| split | English | Chinese |", "|---|---|---|"]
    for split in SPLITS:
        by = splits[split]["by_language"]
        lines.append(f"| {split} | " + " | ".join(f"{_fmt(by[lang]['precision'])} / {_fmt(by[lang]['recall'])}"
                                                    for lang in ("en", "zh")) + " |")
    on = report["repeat_on"]
    lines += ["", f"The repeat trigger (`TANDEM_HANDOFF_ON_REPEAT`, {'on' if report['switches'].get('repeat') else 'off'}"
              "), measured switched on: " + "; ".join(
                  f"{split}: precision {_fmt((on[split][REPEAT] or {}).get('precision'))}, recall "
                  f"{_fmt((on[split][REPEAT] or {}).get('recall'))} (n={(on[split][REPEAT] or {}).get('n', 0)})"
                  for split in SPLITS) + "."]
    if report["wrong"]:
        lines += ["", "Decided wrong on the splits never tuned on:", "", "| split | message | expected | got |",
                  "|---|---|---|---|"]
        lines += [f"| {w['split']} | {w['text'].replace('|', '/')} | {w['expected']} | {w['got']} |"
                  for w in report["wrong"]]
    return "\n".join(lines)
