"""A mixed message: a product question and a policy question in one ("are your towels pure cotton and what is your
return policy?", "这款毛巾是纯棉的吗？退货政策是什么？"). Each part is answered by what answers it alone: the product
part from the catalog (catalog/reply.py), the policy part from the knowledge base's draft with its citation, and the
two are one answer with both sources.

The message is split at clause ends ("?", "？", ";", "；", "。"), " and ", " also " and "还有"; the split is taken only
when every part alone is claimed: by the catalog (a product intent with something to show) or by the knowledge base
(the router would keep it on the small tier: p_llm under tau, with a hit), and at least one part is each's. Anything
else leaves the message to the rest of the chain as it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from catalog.reply import Reply, intent, reply
from chains import answers
from chains.routers.base import RouteContext
from chains.turn import Turn

MIXED = "mixed"  # the intent of a message answered in parts
_SPLIT = re.compile(r"(?<=[?？;；。])\s*|\s+(?:and|also|plus)\s+(?=\w)|\s*还有\s*|\s*另外\s*", re.IGNORECASE)
_MIN_PART_CHARS = 4


@dataclass
class Part:
    text: str
    product: Reply | None = None   # the catalog's answer to this part
    draft: Any = None              # the knowledge base's draft (chains.answers.Draft) of this part


def split(message: str) -> list[str]:
    """The message's clauses, each alone (a question mark kept); one part when it has no clause break."""
    parts = [p.strip(" ,，、") for p in _SPLIT.split(" ".join(message.split()))]
    return [p for p in parts if len(p) >= _MIN_PART_CHARS]


def answer_parts(turn: Turn, search, kb, router, brand) -> Reply | None:
    """The catalog's and the knowledge base's answers to a mixed message combined, or None (see the module)."""
    pieces = split(turn.text)
    if len(pieces) < 2:
        return None
    parts = []
    for piece in pieces:
        found = intent(search, piece)
        parts.append(Part(piece, reply(search, piece, found) if found is not None else None))
    if not any(p.product for p in parts) or all(p.product for p in parts):
        return None
    tau = turn.thresholds.route_threshold
    current = router()
    for part in parts:
        if part.product is not None:
            continue
        evidence: dict[str, float] = {}
        search_text = kb.search_text(part.text)
        vector = kb.encoder_for(part.text).encode_query(search_text)
        hits = kb.search(search_text, k=3, vector=vector, evidence=evidence)
        if not hits or current.score(part.text, RouteContext(vector=vector, hits=hits, evidence=evidence)) >= tau:
            return None  # a part neither the catalog nor the help center answers alone: the chain's, whole
        part.draft = answers.draft_answer(part.text, hits, brand)
    return _combined(parts)


def _combined(parts: list[Part]) -> Reply:
    texts, products, chips, sources = [], [], [], []
    for part in parts:
        if part.product is not None:
            texts.append(part.product.text)
            products += part.product.products
            chips += part.product.filters
            sources += part.product.sources
        else:
            texts.append(part.draft.text)
            sources += part.draft.sources
    kinds = [p.product.kind if p.product is not None else "policy" for p in parts]
    return Reply(MIXED, "\n\n".join(texts), products, chips, sources,
                 detail={"parts": [{"text": p.text, "kind": k} for p, k in zip(parts, kinds)],
                         "products": [c["id"] for c in products],
                         "help_center": [s["answer_id"] for p in parts if p.draft for s in p.draft.sources]})
