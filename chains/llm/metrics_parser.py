"""Read the load signals out of vLLM's Prometheus ``/metrics`` text.

vLLM labels every series with ``model_name`` (and ``engine`` in V1); several engines or models behind one
endpoint are summed for counts, and the fullest KV cache wins (one full engine already queues requests).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from prometheus_client.parser import text_string_to_metric_families

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_CACHE = "vllm:kv_cache_usage_perc"
KV_CACHE_LEGACY = "vllm:gpu_cache_usage_perc"  # vLLM V0 name, still emitted by older servers
TTFT = "vllm:time_to_first_token_seconds"
# Counters (exposed with a _total suffix): prompt tokens looked up in the prefix cache, and those found there.
PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"
CACHE_CONFIG = "vllm:cache_config_info"  # labels: enable_prefix_caching, block_size


@dataclass(frozen=True)
class VLLMMetrics:
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    ttft_sum_s: float | None = None  # histogram totals since server start
    ttft_count: float | None = None
    prefix_cache_queries: float | None = None  # prompt tokens since server start (counters)
    prefix_cache_hits: float | None = None     # of which served from the prefix cache
    prefix_caching: bool | None = None         # the engine's enable_prefix_caching (vllm:cache_config_info)

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Share of prompt tokens served from the prefix cache since the server started."""
        if not self.prefix_cache_queries or self.prefix_cache_hits is None:
            return None
        return self.prefix_cache_hits / self.prefix_cache_queries

    @property
    def ttft_mean_ms(self) -> float | None:
        """Mean time to first token since the server started."""
        if not self.ttft_count or self.ttft_sum_s is None:
            return None
        return 1000.0 * self.ttft_sum_s / self.ttft_count

    def as_dict(self) -> dict:
        return {**asdict(self), "ttft_mean_ms": self.ttft_mean_ms, "prefix_cache_hit_rate": self.prefix_cache_hit_rate}


def parse_vllm_metrics(text: str) -> VLLMMetrics:
    """Parse exposition text; metrics that are absent stay None. Raises ValueError on malformed text."""
    gauges: dict[str, list[float]] = {}
    ttft_sum = ttft_count = None
    counters: dict[str, float] = {}
    caching: list[bool] = []
    for family in text_string_to_metric_families(text):
        if family.name in (RUNNING, WAITING, KV_CACHE, KV_CACHE_LEGACY):
            gauges[family.name] = [s.value for s in family.samples if s.name == family.name]
        elif family.name == TTFT:
            for sample in family.samples:
                if sample.name == TTFT + "_sum":
                    ttft_sum = (ttft_sum or 0.0) + sample.value
                elif sample.name == TTFT + "_count":
                    ttft_count = (ttft_count or 0.0) + sample.value
        elif family.name == CACHE_CONFIG:
            caching += [s.labels["enable_prefix_caching"] == "True" for s in family.samples
                        if "enable_prefix_caching" in s.labels]
        elif family.name in (PREFIX_QUERIES, PREFIX_HITS):
            for sample in family.samples:
                if sample.name == family.name + "_total":
                    counters[family.name] = counters.get(family.name, 0.0) + sample.value
    kv = gauges.get(KV_CACHE) or gauges.get(KV_CACHE_LEGACY)
    return VLLMMetrics(
        running=sum(gauges[RUNNING]) if gauges.get(RUNNING) else None,
        waiting=sum(gauges[WAITING]) if gauges.get(WAITING) else None,
        kv_cache_usage=max(kv) if kv else None,
        ttft_sum_s=ttft_sum,
        ttft_count=ttft_count,
        prefix_cache_queries=counters.get(PREFIX_QUERIES),
        prefix_cache_hits=counters.get(PREFIX_HITS),
        prefix_caching=all(caching) if caching else None,
    )
