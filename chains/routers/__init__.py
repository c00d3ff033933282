"""Routers: one contract (`score(query, context) -> p_llm`), a registry by name, and their training."""
