"""`make bench`: latency, throughput, cold start and hybrid-vs-always-LLM cost, written to reports/bench.json."""
