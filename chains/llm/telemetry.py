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
# vLLM's own counters as the load poller last read them (chains/llm/load.py): a gauge, since they restart at 0 with the
# server. Hit rate over a window: delta(hits[5m]) / delta(queries[5m]); Prometheus also scrapes vLLM's own
# vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total (deploy/prometheus/prometheus.yml, job vllm).
LLM_PREFIX_CACHE_QUERIES = _get_or_create(Gauge, "tandem_llm_prefix_cache_queries_tokens",
                                          "Prompt tokens vLLM looked up in its prefix cache since it started.",
                                          labelnames=("endpoint",))
LLM_PREFIX_CACHE_HITS = _get_or_create(Gauge, "tandem_llm_prefix_cache_hits_tokens",
                                       "Prompt tokens vLLM served from its prefix cache since it started.",
                                       labelnames=("endpoint",))
