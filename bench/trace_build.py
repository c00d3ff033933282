"""The mixed trace's messages (bench/mixed_trace.py): sessions, repeats of frequent questions, replay order.

Sessions come from the hand-written demo-shop conversations, knowledge/eval/demo_sessions.csv (session_id, turn,
query, answer_id, in_scope, split): the held-out split is replayed, the dev split is yesterday's history. Pure:
files in, lists out.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSIONS_CSV = ROOT / "knowledge" / "eval" / "demo_sessions.csv"
SEED = 42
OPEN_SESSIONS = 4        # sessions replayed interleaved at a time
VARIANTS = ("{}", "{}", "{l}", "hi, {}", "{l}?", "{} thanks")


@dataclass
class Msg:
    session: str
    text: str
    answer_id: str = ""      # the labelled KB answer ("" out of scope or a repeat)
    repeat: bool = False     # a repeat of a frequent LLM-bound question


def load_sessions(split: str) -> list[list[Msg]]:
    """The ``split``'s conversations of demo_sessions.csv, each in turn order (an out-of-scope turn has no label)."""
    with SESSIONS_CSV.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["split"] == split]
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["session_id"], []).append(r)
    return [[Msg(sid, r["query"], r["answer_id"] if r["in_scope"] == "True" else "")
             for r in sorted(turns, key=lambda r: int(r["turn"]))] for sid, turns in by.items()]


def variant(text: str, rng: random.Random) -> str:
    """Exact or near-exact wording of a frequent question."""
    lower = text.lower().rstrip("?!. ")
    return rng.choice(VARIANTS).format(text, l=lower)


def build_trace(sessions: list[list[Msg]], frequent: list[str], share: float, seed: int = SEED) -> list[list[Msg]]:
    """The sessions with repeats of ``frequent`` inserted at random places, ``share`` of all messages."""
    rng = random.Random(seed)
    out = [list(s) for s in sessions]
    base = sum(len(s) for s in out)
    repeats = round(base * share / (1 - share)) if frequent else 0
    for i in range(repeats):
        session = rng.choice(out)
        session.insert(rng.randint(0, len(session)), Msg(session[0].session, variant(frequent[i % len(frequent)], rng),
                                                         repeat=True))
    return out


def interleave(sessions: list[list[Msg]], open_at_once: int = OPEN_SESSIONS) -> list[tuple[Msg, int]]:
    """(message, turn number in its session) in replay order: up to ``open_at_once`` sessions in turn."""
    waiting = [list(s) for s in sessions]
    active: list[tuple[list[Msg], list[int]]] = []  # (a session's messages, [how many sent])
    order: list[tuple[Msg, int]] = []
    while waiting or active:
        while waiting and len(active) < open_at_once:
            active.append((waiting.pop(0), [0]))
        for slot in list(active):
            msgs, sent = slot
            order.append((msgs[sent[0]], sent[0] + 1))
            sent[0] += 1
            if sent[0] == len(msgs):
                active.remove(slot)
    return order
