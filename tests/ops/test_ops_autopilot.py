"""The ops autopilot on a simulated clock: live minutes through the real service (real KB, real vLLM behind a
fault-injecting proxy), history built from those real rows (tests/ops/traffic.py), the real ops job reading the
real database.

Incidents start at simulated minute 182 after three hours of history; the job runs at the end of every minute, so
"within 2 minutes" means an alert by the pass at the end of minute 183.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pytest

from ops import alerts, tuner
from ops.detector import evaluate, minute_series
from ops.job import run_once, window_frame
from ops.logframes import load_feedback, load_requests
from storage import policy_store
from tests.conftest import fresh_db, make_runtime
from tests.faults import DelayProxy
from tests.llm_server import live
from tests.ops.traffic import START, Messages, SimClock, clone_history, logged_rows, minute_end, serve_minute, with_total_ms
from tests.vllm_load import engine_idle, wait_for

HISTORY_MIN = 180
PER_MINUTE = 30
INCIDENT = HISTORY_MIN + 2  # two ordinary live minutes first
BUSY_HOST_SLOW_SHARE = 0.03  # of the small tier's requests made slow outliers in history (with_slow_outliers)
# Spread of history's latencies around the pool's (clone_history): exp(N(0, 0.25)) is within ±28 % two times in
# three. The README's detector notes a CI run's LLM calls drifting 1.32 -> 1.51 s within the hour (+14 %); the
# ordinary minutes that failed read 1.4x (LLM) and 2.2x (small p95) the pool's usual.
HISTORY_JITTER = 0.25
# The small tier's question "which one?" off for the incident scenarios: this traffic's new phrasings of KB
# questions reach the LLM as rewrites, the LLM traffic an outage or a slowdown needs. With it on (2026-12-08) the
# incident minutes held no LLM call at all (its out-of-scope messages were answered from the cache's remembered
# replacements), so an LLM outage had nothing to fall back from.
INCIDENT_TRAFFIC = {"clarify_margin": 0.0}


@pytest.fixture(scope="module")
def ops_kb(encoder, tmp_path_factory):
    """The demo KB in a Chroma store of this module's own (one test changes it and changes it back)."""
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.demo_kb import DEMO_FILES

    kb = ChromaKnowledgeBase(encoder, path=tmp_path_factory.mktemp("ops-kb") / "chroma")
    kb.ingest(DEMO_FILES, progress=False)
    return kb


@pytest.fixture(scope="module")
def upstream(llm_server_process):
    url = urlparse(live(llm_server_process).url)
    return url.hostname, url.port


@pytest.fixture(scope="module")
def warm(settings, ops_kb, upstream, tmp_path_factory):
    """Six minutes of ordinary traffic through the real service: the rows history is drawn from, and a cache
    that has seen the common questions (shared by every scenario, as one long-running app would have)."""
    from chains.state import MemoryState

    state = MemoryState()
    proxy = DelayProxy(*upstream)
    runtime = make_runtime(settings.model_copy(update={"llm_url": proxy.url, **INCIDENT_TRAFFIC}), fresh_db(
        tmp_path_factory.mktemp("ops-pool"), "pool"), ops_kb, use_llm=True, state=state)
    clock = SimClock()
    runtime.service.clock = clock
    messages = Messages.load()
    # Two minutes fill the cache first; the pool is drawn from the four after them, so history looks like a
    # long-running app (a cold cache would make history's cache misses, and so its routed mix, unusual).
    for minute in range(2):
        serve_minute(runtime, clock, minute, messages.minute(PER_MINUTE))
    cold = {row["id"] for row in logged_rows(runtime.db)}
    for minute in range(2, 6):
        serve_minute(runtime, clock, minute, messages.minute(PER_MINUTE))
    pool = [row for row in logged_rows(runtime.db) if row["id"] not in cold]
    runtime.close()
    proxy.close()
    routes = {row["route"] for row in pool}
    assert {"small", "cache", "llm"} <= routes, routes
    return {"pool": pool, "state": state, "messages": messages}


def minute_summary(db, minute: int) -> dict[str, list[int]]:
    """What a live minute routed and how long each took (ms, slowest first): the message a surprising alert needs.
    Short on purpose: pytest cuts a long assertion message, and a CI failure once showed two rows of thirty."""
    start = START + timedelta(minutes=minute)
    out: dict[str, list[int]] = {}
    for row in logged_rows(db):
        if start <= row["created_at"].replace(tzinfo=start.tzinfo) < start + timedelta(minutes=1):
            out.setdefault(row["route"], []).append(round(row["total_ms"]))
    return {route: sorted(ms, reverse=True) for route, ms in out.items()}


class Receiver:
    """A real local HTTP server standing in for the operator's alert webhook (Slack, PagerDuty ...)."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                receiver.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def run_incident(settings, ops_kb, upstream, warm, tmp_path, start_incident, webhook: str = "",
                 repeats_after=None):
    """Three hours of history, two ordinary live minutes (no alert may open), then the incident for two minutes
    (``start_incident(proxy, db)`` begins it, and may read the ordinary minutes from ``db``). Returns the alerts the
    two passes after the incident opened."""
    db = fresh_db(tmp_path, "ops")
    # History as three real hours of a busy 2-core host log it: latencies that vary (HISTORY_JITTER) and a few slow
    # small-tier outliers. Four warm-up minutes hold about 55 small-tier and 20 LLM rows; a history cloned from
    # those alone says that nothing is ever slower than the pool's slowest. Ordinary live minutes of CI runs then
    # opened p95_ms_small (p95 85 ms against 39, several slow requests) and p95_ms_llm (three answers of 1.57 s
    # against a usual 1.1 s), both in the test of the LLM outage.
    clone_history(db, with_slow_outliers(warm["pool"], BUSY_HOST_SLOW_SHARE), 0, HISTORY_MIN, PER_MINUTE,
                  latency_jitter=HISTORY_JITTER)
    # Generations an earlier test abandoned must not share the 2 cores with this test's ordinary minutes.
    assert wait_for(lambda: engine_idle(f"http://{upstream[0]}:{upstream[1]}/v1"), 120), \
        "vLLM still busy with an earlier test's requests"
    proxy = DelayProxy(*upstream)
    runtime = make_runtime(settings.model_copy(update={"llm_url": proxy.url, **INCIDENT_TRAFFIC}), db, ops_kb, use_llm=True,
                           state=warm["state"])
    clock = SimClock()
    runtime.service.clock = clock
    messages = warm["messages"]
    try:
        for minute in (HISTORY_MIN, HISTORY_MIN + 1):
            serve_minute(runtime, clock, minute, messages.minute(PER_MINUTE))
            report = run_once(db, minute_end(minute), webhook=webhook)
            assert report.ran and not report.new_alerts, ([a.message for a in report.new_alerts],
                                                          minute_summary(db, minute))
            assert {s.status for s in report.states} == {"ok"}, [(s.name, s.status) for s in report.states]
        start_incident(proxy, db)
        opened = []
        for minute in (INCIDENT, INCIDENT + 1):
            repeats = repeats_after() if repeats_after else None
            serve_minute(runtime, clock, minute, messages.minute(PER_MINUTE, repeats=repeats))
            opened += run_once(db, minute_end(minute), webhook=webhook).new_alerts
        return opened, db
    finally:
        runtime.close()
        proxy.close()


def test_llm_slowdown_opens_a_p95_llm_alert_within_2_minutes_and_reaches_the_webhook(
        settings, ops_kb, upstream, warm, tmp_path):
    receiver = Receiver()

    def slow_down(proxy: DelayProxy, db) -> None:
        # The proxy holds a response back; the engine goes on writing meanwhile, so a hold shorter than a usual
        # answer hides inside it (on an AVX2 host answers took 2.2-2.8 s and a 3 s hold made them 3.04 s). Held
        # 3 s longer than the slowest ordinary answer, every answer is at least that much slower.
        ordinary = [ms for minute in (HISTORY_MIN, HISTORY_MIN + 1) for ms in minute_summary(db, minute).get("llm", [])]
        proxy.delay_s = 3.0 + max(ordinary, default=0) / 1000

    try:
        opened, db = run_incident(settings, ops_kb, upstream, warm, tmp_path, slow_down, webhook=receiver.url)
    finally:
        receiver.close()
    assert "p95_ms_llm" in {a.series for a in opened}, \
        ([a.message for a in opened], {m: minute_summary(db, m) for m in (HISTORY_MIN + 1, INCIDENT, INCIDENT + 1)})
    assert any(body["series"] == "p95_ms_llm" for body in receiver.bodies), receiver.bodies
    stored = {a.series: a for a in alerts.open_alerts(db)}
    # 3 s more than the slowest usual answer at the proxy; the LLM client's per-try timeout caps what a p95 can
    # show, so ask for a rise of over a second, far outside the usual spread
    assert stored["p95_ms_llm"].notified and stored["p95_ms_llm"].value > stored["p95_ms_llm"].baseline + 1000


def test_llm_outage_opens_a_fallback_alert_within_2_minutes(settings, ops_kb, upstream, warm, tmp_path):
    opened, _ = run_incident(settings, ops_kb, upstream, warm, tmp_path, lambda proxy, db: proxy.close())
    assert "fallback_rate" in {a.series for a in opened}, [a.message for a in opened]


def test_kb_change_that_retires_the_cache_opens_a_cache_hit_alert_within_2_minutes(
        settings, ops_kb, upstream, warm, tmp_path):
    from knowledge.ingest import AnswerRow

    before = ops_kb.version
    common = iter(list(warm["messages"].common))  # each repeat asked once after the change: none is re-cached

    def change_kb(proxy: DelayProxy, db) -> None:
        ops_kb.upsert_answers([AnswerRow(answer_id="ops_test_notice", title="Holiday hours",
                                         answer="Our support team answers within 48 hours over the holidays.")])
        assert ops_kb.version != before

    try:
        opened, _ = run_incident(settings, ops_kb, upstream, warm, tmp_path, change_kb,
                                 repeats_after=lambda: common)
    finally:
        assert ops_kb.remove("ops_test_notice")
    assert ops_kb.version == before  # the same content is the same version again (the cache is valid again)
    assert "cache_hit_rate" in {a.series for a in opened}, [a.message for a in opened]


def with_slow_outliers(pool: list[dict], share: float, seed: int = 3) -> list[dict]:
    """The pool as a busy 2-core host logs it: ``share`` of the small tier's requests (at least one) made slow
    outliers (100-400 ms). Made up on purpose, and named so: whether a run's own warm-up logs such rows is chance (a
    CI run's did, about 2 %, and the p95 z the detector used then opened 32 alerts in its simulated day). Exactly
    that share, not a draw per row: 3 % of 55 rows drawn one by one is no row at all one time in five."""
    rng = np.random.default_rng(seed)
    small = [i for i, row in enumerate(pool) if row["route"] == "small"]
    slowed = set(rng.choice(small, size=min(len(small), max(1, round(share * len(small)))), replace=False).tolist())
    out = []
    for i, row in enumerate(pool):
        if i in slowed:
            row = with_total_ms(row, float(rng.uniform(100.0, 400.0)))
        out.append(row)
    return out


def test_steady_traffic_with_slow_outliers_opens_at_most_one_alert_over_24_simulated_hours(warm, tmp_path):
    """The issue's budget: <= 1 false alert per simulated day. Each minute's rows are drawn at random from real
    logged rows, so a minute carries real counting noise; the detector opens about one alert in 5-10 such days over
    all its series (`python -m bench.detector_sim`), the Gaussian z it replaced 3-13 a day on one rare rate. Steady
    traffic on a busy host has slow outliers: 3 % of the small tier's requests here."""
    db = fresh_db(tmp_path, "steady")
    day = 24 * 60
    clone_history(db, with_slow_outliers(warm["pool"], BUSY_HOST_SLOW_SHARE), 0, HISTORY_MIN + day, PER_MINUTE,
                  seed=23)
    frame = load_requests(db)
    frame = frame.assign(created_at=pd.to_datetime(frame["created_at"], utc=True))
    series = minute_series(frame, load_feedback(db))
    opened, alert_minutes = [], []
    for minute in range(HISTORY_MIN, HISTORY_MIN + day):
        states = evaluate(series, minute_end(minute))
        alert_minutes += [(minute, s.name, s.value, s.baseline, s.spread) for s in states if s.status == "alert"]
        opened += alerts.reconcile(db, states, minute_end(minute))
    assert len(opened) <= 1, ([(a.created_at, a.message) for a in opened], alert_minutes)
    assert len(alert_minutes) <= 10, alert_minutes  # a false alert is a blip, not an hour of red


def test_a_series_with_too_little_history_says_it_is_learning(warm, tmp_path):
    db = fresh_db(tmp_path, "young")
    clone_history(db, warm["pool"], 0, 30, PER_MINUTE)
    report = run_once(db, minute_end(29))
    assert report.ran and not report.new_alerts
    assert {s.status for s in report.states} == {"learning"}
    assert all(s.detail["needs_minutes"] == 60 for s in report.states)


# --- automatic tuning ---------------------------------------------------------------------------------
WINDOW = 5
DRIFT_SEED = 19


def drifted() -> list[str]:
    """40 messages, 45 % out of scope (twice the usual share), the same each window so windows compare. Drawn from
    a generator of their own: from the module's shared one, the batch depended on which tests ran first."""
    return Messages.load(seed=DRIFT_SEED).minute(40, oos_share=0.45, repeat_share=0.0)


def serve_window(runtime, clock, window: int, batch: list[str]) -> None:
    per = len(batch) // WINDOW
    for i in range(WINDOW):
        serve_minute(runtime, clock, window * WINDOW + i, batch[i * per:(i + 1) * per])


# The tuner reads what the router decided (route, p_llm, draft quality) and the customers' ratings, never the LLM's
# text: its answers here are two tokens long (still a real call; the route is logged the same). With the tests'
# 16 tokens the drift and rollback tests took 122 s and 79 s, with 2 tokens 34 s and 29 s (same session, 2 cores).
TUNING_ANSWER_TOKENS = 2


def tuning_runtime(settings, ops_kb, upstream, db):
    """No response cache here (TTL 0): each window asks the same messages, and all must be routed again."""
    proxy = DelayProxy(*upstream)
    runtime = make_runtime(settings.model_copy(update={"llm_url": proxy.url, "cache_ttl_s": 0,
                                                       "llm_max_tokens": TUNING_ANSWER_TOKENS}), db, ops_kb,
                           use_llm=True)
    clock = SimClock()
    runtime.service.clock = clock
    return runtime, clock, proxy


def reachable_target(db, start) -> tuple[float, float]:
    """The objective for these tests: what two full steps (τ +0.10, rewrite -0.10) would give on window 0's
    traffic. Returns (target, share now); the test data must make a real move necessary."""
    frame = window_frame(db, start)
    frame = frame.assign(created_at=pd.to_datetime(frame["created_at"], utc=True))
    start_just_below_a_cluster_of_scores(db, frame)
    now = policy_store.current(db)
    share_now = tuner.modelled(frame, now.route_threshold, now.rewrite_threshold, 0.002).llm_share
    share_two_steps = tuner.modelled(frame, min(1.0, now.route_threshold + 0.10),
                                     max(0.0, now.rewrite_threshold - 0.10), 0.002).llm_share
    assert share_two_steps < share_now - 0.04, (share_now, share_two_steps)
    return share_two_steps + 0.005, share_now


def start_just_below_a_cluster_of_scores(db, frame: pd.DataFrame) -> None:
    """The evidence router's p_llm sits near 0 or near 1, far from the default τ, so no step moves anything there.
    Start τ where a step matters: just below the densest 0.09-wide band of the window's LLM-bound scores whose
    drafts are good enough to stay unrewritten after two steps (their fate is τ's alone)."""
    now = policy_store.current(db)
    routed = frame[frame["p_llm"].notna() & (frame["route"] != "guard")]
    movable = np.sort(routed.loc[routed["draft_quality"].fillna(1.0) >= now.rewrite_threshold - 0.10,
                                 "p_llm"].to_numpy(dtype=float))
    movable = movable[movable <= 0.9]  # τ + 0.10 must stay below 1
    assert len(movable), "no LLM-bound score a threshold step could move"
    counts = [int(((movable > low - 0.001) & (movable <= low + 0.089)).sum()) for low in movable]
    tau = round(max(0.0, float(movable[int(np.argmax(counts))]) - 0.001), 4)
    policy_store.save(db, {"route_threshold": tau}, "test", "start just below a cluster of logged scores")


def measured_share(db, window: int) -> float:
    frame = window_frame(db, START + timedelta(minutes=window * WINDOW))
    routed = frame[frame["p_llm"].notna() & (frame["route"] != "guard")]
    end = START + timedelta(minutes=(window + 1) * WINDOW)
    routed = routed[pd.to_datetime(routed["created_at"], utc=True) < end]
    return float((routed["route"] == "llm").mean())


def enable_autotune(db, target: float) -> None:
    policy_store.save(db, {"autotune": {"enabled": True, "objective": "llm_share", "target": target,
                                        "window_min": WINDOW, "step": 0.05, "min_requests": 30}},
                      "test", "switch the autopilot on")


def test_drifted_traffic_makes_the_tuner_reach_an_llm_share_objective_within_3_windows(
        settings, ops_kb, upstream, warm, tmp_path):
    db = fresh_db(tmp_path, "drift")
    runtime, clock, proxy = tuning_runtime(settings, ops_kb, upstream, db)
    batch = drifted()
    tau0 = policy_store.current(db).route_threshold
    try:
        serve_window(runtime, clock, 0, batch)
        target, share_before = reachable_target(db, START)
        tau0 = policy_store.current(db).route_threshold
        enable_autotune(db, target)
        kinds = []
        for window in range(1, 4):  # the pass at the end of window w-1, then window w is served at its thresholds
            report = run_once(db, START + timedelta(minutes=window * WINDOW))
            kinds.append(report.tuner_event.kind)
            serve_window(runtime, clock, window, batch)
        final = policy_store.current(db)
        assert "applied" in kinds and "rolled_back" not in kinds, kinds
        assert final.route_threshold > tau0
        assert measured_share(db, 3) <= target, (share_before, target, measured_share(db, 3), kinds)
        assert not alerts.open_alerts(db)
        history = policy_store.history(db)
        assert any(row.author == tuner.AUTHOR and row.evidence.get("objective") == "llm_share" for row in history)
    finally:
        runtime.close()
        proxy.close()


def test_a_change_that_makes_customers_unhappy_is_rolled_back_with_an_alert(
        settings, ops_kb, upstream, warm, tmp_path):
    db = fresh_db(tmp_path, "rollback")
    runtime, clock, proxy = tuning_runtime(settings, ops_kb, upstream, db)
    batch = drifted()
    before = policy_store.current(db)
    try:
        serve_window(runtime, clock, 0, batch)
        target, _ = reachable_target(db, START)
        before = policy_store.current(db)
        enable_autotune(db, target)
        applied = run_once(db, START + timedelta(minutes=WINDOW)).tuner_event
        assert applied.kind == "applied", applied.message
        assert policy_store.current(db).route_threshold > before.route_threshold
        # the window after the change: customers rate the answers the small tier now gives them as bad
        clock.at_minute(WINDOW)
        for minute in range(WINDOW, 2 * WINDOW):
            part = batch[(minute - WINDOW) * 8:(minute - WINDOW + 1) * 8]
            for response in serve_minute(runtime, clock, minute, part):
                if response.route == "small":
                    runtime.service.feedback(response.request_id, -1, "not what I asked")
        event = run_once(db, START + timedelta(minutes=2 * WINDOW)).tuner_event
        assert event.kind == "rolled_back", event.message
        assert "negative feedback" in event.message
        restored = policy_store.current(db)
        assert (restored.route_threshold, restored.rewrite_threshold) == (before.route_threshold,
                                                                          before.rewrite_threshold)
        assert [a.series for a in alerts.open_alerts(db)] == ["autotune"]
        # an open alert stops further automatic changes until an operator acknowledges it
        serve_window(runtime, clock, 2, batch)
        held = run_once(db, START + timedelta(minutes=3 * WINDOW)).tuner_event
        assert held.kind == "skipped" and "alert is open" in held.message
    finally:
        runtime.close()
        proxy.close()


def test_the_tuner_changes_nothing_with_too_little_traffic(settings, ops_kb, upstream, warm, tmp_path):
    db = fresh_db(tmp_path, "quiet")
    runtime, clock, proxy = tuning_runtime(settings, ops_kb, upstream, db)
    tau = policy_store.current(db).route_threshold
    try:
        serve_window(runtime, clock, 0, drifted()[:10])
        enable_autotune(db, 0.05)
        event = run_once(db, START + timedelta(minutes=WINDOW)).tuner_event
        assert event.kind == "skipped" and "routed requests" in event.message
        assert policy_store.current(db).route_threshold == tau
    finally:
        runtime.close()
        proxy.close()
