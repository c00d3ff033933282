"""Router chain: guard, cache, rules, learned score and threshold, then the small tier or the LLM tier (LCEL)."""
