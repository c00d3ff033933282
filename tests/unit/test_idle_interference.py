"""The idle-time worker's delay bench (bench/idle_interference.py) without the LLM: the live messages and their
arrival times, and how two passes are compared and reported. (The passes need a vLLM server and minutes; they run in
`make bench` and `python -m bench.idle_interference`.)"""

from __future__ import annotations

from bench.idle_interference import compare, live_messages, schedule, table, targets
from bench.trace_build import load_sessions


def test_live_messages_are_distinct_held_out_out_of_scope_turns():
    messages = live_messages(24)
    held_out = {m.text for s in load_sessions("heldout") for m in s if not m.answer_id}
    assert len(messages) == 24 == len({m.text for m in messages}) and {m.text for m in messages} <= held_out


def test_arrivals_start_at_zero_rise_and_are_the_same_every_run():
    arrivals = schedule(50, 4.0)
    assert arrivals[0] == 0.0 and all(b > a for a, b in zip(arrivals, arrivals[1:]))
    assert 2.0 < arrivals[-1] / 49 < 8.0 and schedule(50, 4.0) == arrivals


def _pass(rows, p95, mean=1000, worker=None):
    return {"rows": rows, "p95_ms": p95, "mean_ms": mean, "p50_ms": mean, "live_llm": len(rows), **(
        {"worker": worker} if worker else {})}


def test_an_overlapped_request_much_slower_than_without_the_worker_counts_as_waiting():
    off = _pass([{"text": "a", "ms": 1000, "overlapped": False}, {"text": "b", "ms": 1000, "overlapped": False}], 2000)
    on = _pass([{"text": "a", "ms": 1500, "overlapped": True}, {"text": "b", "ms": 1100, "overlapped": True}], 2200,
               worker={"logged": 3, "cancelled": 2, "stored": 0, "tokens": 900, "overlapped_live": 2})
    compared = compare(off, on)
    assert compared["p95_ratio"] == 1.1 and compared["overlapped_extra_ms"] == [500, 100]
    assert compared["overlapped_waiting"] == 1
    assert [t["met"] for t in targets(compared)] == [False, False]
    lines = table({"passes": {"worker off": off, "worker on": on}, "compare": compared, "targets": targets(compared)})
    assert any(line.startswith("| worker on | 2 |") and "3 (2, 0)" in line for line in lines)


def test_a_few_milliseconds_on_a_fast_answer_is_not_waiting():
    off = _pass([{"text": "a", "ms": 9, "overlapped": False}], 9)
    on = _pass([{"text": "a", "ms": 11, "overlapped": True}], 11)
    assert compare(off, on)["overlapped_waiting"] == 0
