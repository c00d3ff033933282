"""The routing runtime: the LCEL router chain (guard, cache, rules/tools, routers, threshold, load gate, tiers),
the LLM client, the shared state, and the service and composition root that serve it."""
