"""The routing runtime: the LCEL router chain (guard, cache, rules/tools, routers, threshold, load gate, tiers,
answer check), the LLM client, the state replicas share (in memory, or Redis), and the service and composition root
that serve it."""
