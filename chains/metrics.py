"""App-side Prometheus metrics (served at GET /metrics): routes, per-stage latency, cache, fallback.
The LLM side (calls, errors, breaker, in-flight, degrade) is in chains/llm/telemetry.py."""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Histogram


def get_or_create(kind, name: str, documentation: str, **kwargs):
    """Re-imports (tests, Streamlit reruns) must not register the same name twice; prometheus_client has no
    public lookup, hence the registry's private map."""
    existing = REGISTRY._names_to_collectors.get(name) or REGISTRY._names_to_collectors.get(f"{name}_total")
    return existing if existing is not None else kind(name, documentation, **kwargs)


ROUTES = get_or_create(Counter, "tandem_requests", "Messages answered, by route.", labelnames=["route"])
STAGE_LATENCY = get_or_create(Histogram, "tandem_stage_latency_seconds", "Latency of each chain stage.",
                               labelnames=["stage"],
                               buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
CACHE = get_or_create(Counter, "tandem_cache_lookups", "Cache lookups by result.", labelnames=["result"])
FALLBACK = get_or_create(Counter, "tandem_fallback", "LLM failures answered by the small-tier fallback.")
LOG_WRITE_FAILURES = get_or_create(Counter, "tandem_log_write_failures", "Request rows that could not be written.")
CHECKED = get_or_create(Counter, "tandem_checked_answers", "LLM answers the answer check looked at.")
CHECK_FINDINGS = get_or_create(Counter, "tandem_check_findings", "Answer-check findings by kind and action taken.",
                               labelnames=["kind", "action"])


def observe(response, turn) -> None:
    ROUTES.labels(route=response.route).inc()
    for stage, ms in response.latency_ms.items():
        STAGE_LATENCY.labels(stage=stage).observe(ms / 1000.0)
    if any(step["stage"] == "cache" and step["decision"] != "skipped" for step in turn.trace):
        CACHE.labels(result="hit" if turn.cache_hit else "miss").inc()
    if response.fallback:
        FALLBACK.inc()
    if any(step.get("stage") == "check" for step in turn.trace):
        CHECKED.inc()
        for finding in turn.findings:
            CHECK_FINDINGS.labels(kind=finding["kind"], action=finding["action"]).inc()
# The handoff (chains/conversation.py): how many conversations each trigger queued, how long they waited for a person.
HANDOFFS = get_or_create(Counter, "tandem_handoffs", "Conversations queued for a person, by trigger.",
                         labelnames=["trigger"])
PICKUP = get_or_create(Histogram, "tandem_handoff_pickup_seconds", "Time from a handoff until an operator claimed it.",
                       buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400))
FIRST_REPLY = get_or_create(Histogram, "tandem_handoff_first_reply_seconds",
                            "Time from a handoff until the first operator message that followed it.",
                            buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400))
