"""The mixed trace of `make bench` section 7 (bench/trace_build.py, bench/mixed_trace.py), without the LLM: the real
demo-shop files make the sessions, the repeats land where and as often as the design says, the replay order keeps
each session's order, and the table and targets read a pass summary right. (The passes themselves need two vLLM
servers and half an hour; they run in `make bench` and `python -m bench.mixed_trace`.)"""

from __future__ import annotations

import csv
from collections import Counter

from bench.mixed_trace import Row, summarize, table, targets
from bench.trace_build import OPEN_SESSIONS, SESSIONS_CSV, build_trace, interleave, load_sessions
from chains.cache import normalise

FREQUENT = ["What colour towels would go well with a dark green bathroom?",
            "did you catch the match on telly yesterday, what a game eh"]


def session_rows(split: str) -> list[dict]:
    with SESSIONS_CSV.open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["split"] == split]


def test_sessions_hold_every_message_of_the_split_once_in_turn_order_with_its_label():
    sessions = load_sessions("heldout")
    rows = session_rows("heldout")
    assert Counter(m.text for s in sessions for m in s) == Counter(r["query"] for r in rows)
    assert len(sessions) == len({r["session_id"] for r in rows}) and all(3 <= len(s) <= 6 for s in sessions)
    turns = {(r["session_id"], r["query"]): int(r["turn"]) for r in rows}
    assert all([turns[(m.session, m.text)] for m in s] == list(range(1, len(s) + 1)) for s in sessions)
    labels = {r["query"]: r["answer_id"] if r["in_scope"] == "True" else "" for r in rows}
    assert all(m.answer_id == labels[m.text] and not m.repeat for s in sessions for m in s)
    assert not {m.text for s in sessions for m in s} & {m.text for s in load_sessions("dev") for m in s}


def test_repeats_are_the_share_asked_near_exact_inside_sessions_that_keep_their_order():
    sessions = load_sessions("heldout")[:20]
    trace = build_trace(sessions, FREQUENT, 0.3)
    messages = [m for s in trace for m in s]
    repeats = [m for m in messages if m.repeat]
    assert abs(len(repeats) / len(messages) - 0.3) < 0.01
    assert all(any(normalise(q) in normalise(m.text) for q in FREQUENT) for m in repeats)
    assert {normalise(m.text) for m in repeats} != {normalise(q) for q in FREQUENT}  # some wording varies
    for original, replayed in zip(sessions, trace):
        assert [m for m in replayed if not m.repeat] == original
        assert all(m.session == original[0].session for m in replayed)
    assert build_trace(sessions, [], 0.3) == sessions


def test_the_replay_order_keeps_each_session_in_order_with_a_few_open_at_once():
    trace = build_trace(load_sessions("heldout")[:12], FREQUENT, 0.3)
    order = interleave(trace)
    assert len(order) == sum(map(len, trace))
    for session in trace:
        mine = [(m, turn) for m, turn in order if m.session == session[0].session]
        assert [m for m, _ in mine] == session and [turn for _, turn in mine] == list(range(1, len(session) + 1))
    open_now, most = set(), 0
    remaining = Counter(m.session for s in trace for m in s)
    for m, _ in order:
        open_now.add(m.session)
        most = max(most, len(open_now))
        remaining[m.session] -= 1
        if not remaining[m.session]:
            open_now.discard(m.session)
    assert most == OPEN_SESSIONS


def test_summary_table_and_targets():
    rows = [Row(1, False, "small", 20.0, 20.0, False), Row(2, True, "llm", 4000.0, 4000.0, True, prefix=(128, 400)),
            Row(2, True, "cache", 5.0, 5.0, False, cache=True, prepared=True),
            Row(3, False, "small", 30.0, 10.0, False, clicked=True, offered=3),
            Row(3, True, "cache", 5.0, 5.0, False, cache=True, replaced=True)]
    summary = summarize(rows)
    assert summary["llm_calls"] == 1 and summary["cache_hits"] == 2 and summary["prepared_hits"] == 1
    assert summary["replaced_hits"] == 1
    assert summary["prefix_hit_rate_turn2plus"] == 0.32 and summary["suggestion_clicks"] == 1
    assert summary["latency_ms"]["mean"] == 812.0 and summary["repeats"] == 3
    base = {**summary, "idle": None, "followups": "off", "live_llm_waiting_on_idle_work": 0}
    passes = {"all off": {**base, "llm_calls": 10, "latency_ms": {**summary["latency_ms"], "mean": 1000.0}},
              "answer cache + prepared": {**base, "llm_calls": 7, "idle": {"tokens": 900, "stored": 2},
                                          "live_llm_waiting_on_idle_work": 1},
              "follow-ups": {**base, "followups": "not available"},
              "all on": {**base, "latency_ms": {**summary["latency_ms"], "mean": 700.0}}}
    got = {t["metric"]: (t["measured"], t["met"]) for t in targets(passes)}
    assert got == {"LLM calls, answer cache + prepared / all off": (0.7, True),
                   "mean latency of the trace, all on / all off": (0.7, False),
                   "live LLM requests waiting on idle-time work": (1, False)}
    lines = table({"sessions": 1, "messages": 5, "repeat_share": 0.3, "frequent": FREQUENT, "model": "qwen2.5-0.5b",
                   "max_tokens": 96, "passes": passes, "targets": targets(passes)})
    assert lines[4].startswith("| all off | 10 | 1000 |") and "| 2 (1, 1) |" in lines[4] and "| 900 (2) |" in lines[5]
    assert "not available" in lines[6] and lines[-3].endswith("| 0.7 | True |")
