"""The what-if replay math against a direct, plain-Python computation on the same rows."""

from __future__ import annotations

import io
import math
import random

import numpy as np
import pandas as pd
import pytest

from ops import replay
from ops.logframes import flatten_requests


def _rows(n: int = 240, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        route = rng.choice(["small", "small", "llm", "cache", "guard"])
        latency = {"guard": rng.uniform(0.1, 1), "cache": rng.uniform(0.1, 1), "embed": rng.uniform(5, 20),
                   "score": rng.uniform(0.1, 2)}
        scores = {}
        if route in ("small", "llm"):
            scores["p_llm"] = rng.uniform(0.5, 1.0) if route == "llm" else rng.uniform(0.0, 0.5)
            latency["generate"] = rng.uniform(1000, 3000) if route == "llm" else rng.uniform(1, 10)
        latency["total"] = sum(latency.values()) + 2.0
        tokens = (rng.randint(100, 300), rng.randint(20, 90)) if route == "llm" else (0, 0)
        rows.append({"id": f"r{i}", "created_at": pd.Timestamp("2026-01-01", tz="UTC"), "route": route,
                     "scores": scores, "latency_ms": latency, "prompt_tokens": tokens[0],
                     "completion_tokens": tokens[1]})
    return rows


def test_sweep_equals_a_direct_computation():
    rows = _rows()
    frame = flatten_requests(rows)
    ratings = {row["id"]: (1 if i % 3 else -1) for i, row in enumerate(rows) if i % 2 == 0}
    feedback = pd.DataFrame({"request_id": list(ratings), "rating": list(ratings.values()),
                             "created_at": pd.Timestamp("2026-01-02", tz="UTC")})
    data = replay.data_from_log(frame, feedback)
    model = replay.latency_model_from_log(frame)
    tokens = replay.mean_llm_tokens(frame)
    price = 0.002
    curve = replay.sweep(data, model, tokens, price, taus=np.array([0.0, 0.25, 0.5, 0.75, 1.0]))

    # Direct computation, plain Python.
    routed = [r for r in rows if "p_llm" in r["scores"]]
    sched = lambda r: sum(r["latency_ms"][s] for s in ("guard", "cache", "embed", "score"))  # noqa: E731
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    l_sched = mean([sched(r) for r in routed])
    l_small = mean([r["latency_ms"]["total"] - sched(r) for r in routed if r["route"] == "small"])
    l_llm = mean([r["latency_ms"]["total"] - sched(r) for r in routed if r["route"] == "llm"])
    llm_tokens = mean([r["prompt_tokens"] + r["completion_tokens"] for r in rows if r["route"] == "llm"])
    assert model.sched_ms == pytest.approx(l_sched) and model.small_ms == pytest.approx(l_small)
    assert model.llm_ms == pytest.approx(l_llm) and tokens == pytest.approx(llm_tokens)
    for row in curve.itertuples():
        to_llm = [r["scores"]["p_llm"] >= row.tau for r in routed]
        share = sum(to_llm) / len(routed)
        assert row.llm_share == pytest.approx(share)
        assert row.latency_ms == pytest.approx(l_sched + (1 - share) * l_small + share * l_llm)
        assert row.cost_per_request == pytest.approx(share * llm_tokens / 1000 * price)
        # Labels: a rated small-tier answer (+1 right, -1 wrong); the LLM counts as right.
        outcomes = [1.0 if go_llm else float(ratings[r["id"]] > 0)
                    for r, go_llm in zip(routed, to_llm) if r["route"] == "small" and r["id"] in ratings]
        assert row.quality == pytest.approx(mean(outcomes))


def test_gap_summary_apgr_and_cpt_by_hand():
    # Four labelled requests; the small tier is wrong on the two with the highest p_llm.
    csv = "p_llm,label_llm_needed\n0.9,1\n0.7,1\n0.4,0\n0.1,0\n"
    data, latency = replay.data_from_csv(pd.read_csv(io.StringIO(csv)))
    assert latency is None
    summary = replay.gap_summary(data)
    assert summary["q_small"] == 0.5 and summary["q_llm"] == 1.0
    # Operating points (LLM share, PGR): (0,0) (.25,.5) (.5,1) (.75,1) (1,1) -> trapezoid area.
    area = 0.25 * (0 + 0.5) / 2 + 0.25 * (0.5 + 1) / 2 + 0.25 * 1 + 0.25 * 1
    assert summary["apgr"] == pytest.approx(area)
    assert summary["cpt50"] == pytest.approx(0.25) and summary["cpt80"] == pytest.approx(0.5)


def test_pick_tau_for_a_share_and_for_a_latency_slo():
    data = replay.ReplayData(np.array([0.95, 0.8, 0.6, 0.3, 0.1]), np.full(5, math.nan), np.ones(5))
    tau, share = replay.tau_for_llm_share(data, 0.4)
    assert share == pytest.approx(0.4) and 0.6 < tau <= 0.8
    model = replay.LatencyModel(sched_ms=10, small_ms=50, llm_ms=1000)
    tau, ms = replay.tau_for_latency_slo(data, model, slo_ms=10 + 0.8 * 50 + 0.2 * 1000)
    assert ms == pytest.approx(250) and 0.8 < tau <= 0.95
    assert replay.tau_for_latency_slo(data, model, slo_ms=5) is None


@pytest.mark.parametrize("csv, message", [
    ("score\n0.2\n", "needs a p_llm column"),
    ("p_llm\n0.2\n1.7\n", "line 3"),
    ("p_llm,correct_small\n0.2,2\n", "correct_small must be 0 or 1"),
])
def test_bad_csv_gets_a_clear_message(csv, message):
    with pytest.raises(replay.ReplayInputError, match=message):
        replay.data_from_csv(pd.read_csv(io.StringIO(csv)))
