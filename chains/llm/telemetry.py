"""Prometheus metrics of the LLM side, in the default registry (scraped with the app's /metrics).

Re-importing this module (reloads in tests, Streamlit reruns) must not raise "Duplicated timeseries",
so each collector is looked up in the registry before it is created.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from chains.metrics import get_or_create as _get_or_create

LLM_REQUESTS = _get_or_create(Counter, "tandem_llm_requests_total", "LLM calls by tier and outcome.",
                              labelnames=("tier", "outcome"))
LLM_ERRORS = _get_or_create(Counter, "tandem_llm_errors_total", "Failed LLM tries by kind.", labelnames=("kind",))
LLM_BREAKER_STATE = _get_or_create(Gauge, "tandem_llm_breaker_state",
                                   "Circuit breaker: 0 closed, 1 half-open, 2 open.")
LLM_INFLIGHT = _get_or_create(Gauge, "tandem_llm_inflight", "LLM calls in flight.")
LLM_LATENCY = _get_or_create(Histogram, "tandem_llm_latency_seconds", "Latency of successful LLM calls.",
                             buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60))
LLM_DEGRADED = _get_or_create(Counter, "tandem_llm_degraded_total",
                              "Messages kept on the small tier because the LLM was overloaded.")
