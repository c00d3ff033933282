"""Tiers: what answers a turn once the route is decided, as plug-ins in one registry (``TIERS``).

Importing this package registers the built-in tiers: ``small`` (the KB draft), ``llm`` (an LLM answer or a
verified rewrite), ``tool`` (a rule ran a tool: the order status), ``handoff`` (a rule sends the message to a
person), ``catalog`` (a product message answered from the product catalog, no LLM) and ``answered`` (guard and
cache answers settled before the routing stages).
"""

from chains.tiers import answered, catalog, handoff, llm, small, tool  # noqa: F401  (registers them)
from chains.tiers.base import ROUTES, TIERS, Tier, TierParts, cacheable, register

__all__ = ["ROUTES", "TIERS", "Tier", "TierParts", "cacheable", "register"]
