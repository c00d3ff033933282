"""LLM tier: serving the large model, and the resilient, load-aware client the router chain calls."""
