"""The catalog tier: a product message answered from the product catalog, with no LLM (catalog/reply.py).

The chain's catalog step (chains/router_chain.py, right after the guard) asks :meth:`CatalogTier.claim` whether the
message is a product message the catalog can answer: a search ("a blue throw blanket under $50"), a product fact ("are
your towels pure cotton?"), a comparison ("compare the two cheapest desk lamps") or stock and variants ("does the
merino sweater come in navy in size L?"). A claimed turn skips the cache lookup (catalog answers are never cached: a
changed price must never be served from a cache), the score and the threshold; a rule that matches still wins (the
order tool, a handoff). With no catalog, or one with no products, the step does nothing and the chain is what it was.

The answer carries the product cards and the filter chips (``Turn.products``/``filters``, then ChatResponse's), and
a fact's sources name the product and the field.

Advice ("which kettle is best for a family of five?", "a gift under $50") is the LLM's, never without products: the
step keeps the candidates on the turn (``Turn.advice``, catalog/advice.py), their cards go with the answer, and after
the threshold stage :meth:`CatalogTier.claims` sends the turn to the LLM tier, which writes from their records and
checks what it says about them (chains/tiers/llm.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from catalog.advice import advice
from catalog.reply import UNMET, Reply, intent, photo, reply, unmet
from chains.conversation import PHOTO
from chains.mixed import answer_parts
from chains.schema import Revised
from chains.tiers.base import CATALOG_ROUTE, LLM_ROUTE, Tier, register
from chains.turn import Turn, timed
from core.pii import mask


@register
class CatalogTier(Tier):
    name = CATALOG_ROUTE
    plans = (CATALOG_ROUTE,)
    ruled_only = True  # a claimed message needs no retrieval, score or threshold

    def claim(self, turn: Turn) -> bool:
        """Whether the catalog answers this turn; if so its reply is kept on the turn and the plan set. Every product
        message it takes up is logged (catalog.log: the console's search log and null-search report), found or not."""
        source = self.parts.catalog
        request = turn.request
        if source is None or turn.done or request.mode != "routed" or request.names_answer:
            return False
        found = None
        answer: Reply | None = None
        with timed(turn, "catalog"):
            try:
                search = source.current()
                if search is None:  # no catalog ingested: nothing changes
                    return False
                if request.photos:  # a product photo: its barcode's GTIN first, then its label's text
                    answer = photo(search, request.message or "", [c for p in request.photos for c in p.codes],
                                   "\n".join(p.text for p in request.photos if p.text))
                if answer is None:
                    last_answer = next((t["content"] for t in reversed(turn.history) if t.get("role") == "assistant"),
                                       "")
                    found = intent(search, turn.text, last_answer)
                    answer = reply(search, turn.text, found) if found is not None else None
                    if found is None and answer is None and self.parts.kb is not None:
                        answer = answer_parts(turn, search, self.parts.kb, self.parts.router, self.parts.brand)
                    if found is None and answer is None and (advised := advice(search, turn.text)) is not None:
                        if self.parts.llm is not None:
                            self._advise(turn, search, advised)
                            return False  # the LLM answers it (claims, after the threshold stage)
                        answer = advised.reply()  # no LLM in this run: the candidates' cards, and that they are all
                    if found is None and answer is None and (wanted := unmet(search, turn.text)) is not None:
                        found = wanted  # logged as a null search ("do you sell bicycles?"); the chain answers it
            except Exception as exc:  # a broken catalog must not break every other answer: the chain goes on without it
                turn.note("catalog", "unavailable", error=f"{exc.__class__.__name__}: {exc}"[:300])
                return False
            if answer is not None or found is not None:
                self._log(turn, search, answer, found)
        if answer is None:
            if found is not None and found.kind != UNMET:
                turn.note("catalog", f"{found.kind}: nothing to show", kind=found.kind)
            return False
        turn.catalog, turn.plan, turn.intent = answer, CATALOG_ROUTE, answer.kind
        turn.products, turn.filters = answer.products, answer.filters  # known now: they go with the route decision
        turn.note("catalog", answer.kind, kind=answer.kind, version=search.catalog.loaded_version, **answer.detail)
        turn.reasons.append(f"catalog: a product {answer.kind} message")
        return True

    @staticmethod
    def _advise(turn: Turn, search, wanted) -> None:
        """An advice message with candidates: their cards and chips go with whatever answers it; the LLM is asked."""
        turn.advice, turn.products, turn.filters, turn.intent = wanted, wanted.cards, wanted.chips, "advice"
        turn.note("catalog", "advice", kind="advice", version=search.catalog.loaded_version,
                  products=[p.id for p in wanted.products], filters=wanted.filters.label)
        try:
            search.catalog.log_search(mask(turn.text), "advice", wanted.filters.label,
                                      [p.id for p in wanted.products], "", turn.request.session_id)
        except Exception as exc:
            turn.note("catalog", "search log not written", error=f"{exc.__class__.__name__}: {exc}"[:300])

    def claims(self, turn: Turn) -> tuple[str, str] | None:
        """Advice on products goes to the LLM with the candidates' records, whatever the score: the help center's
        draft never answers "which kettle for a family of five?" (an operator's rule still decides first)."""
        if turn.advice is None or turn.rule is not None or turn.request.mode != "routed":
            return None
        return LLM_ROUTE, f"catalog: product advice, the LLM writes it from {len(turn.advice.products)} candidates' records"

    @staticmethod
    def _log(turn: Turn, search, answer: Reply | None, found) -> None:
        """One row of the catalog's search log; a failure to write it costs the row, never the answer."""
        request = turn.request
        query = mask(turn.text) or " ".join(f"barcode {c}" for p in request.photos for c in p.codes)
        kind = answer.kind if answer is not None else "search" if found.kind == UNMET else found.kind
        chips = answer.filters if answer is not None else found.filters.chips()
        filters = " · ".join(str(c.get("label", "")) for c in chips if c.get("label"))
        if answer is not None and answer.kind == "photo":
            filters = str(answer.detail.get("via") or "photo")
        relaxed = ", ".join(answer.detail.get("relaxed") or []) if answer is not None else ""
        try:
            search.catalog.log_search(query, kind, filters, [c["id"] for c in answer.products] if answer else [],
                                      relaxed, request.session_id)
        except Exception as exc:
            turn.note("catalog", "search log not written", error=f"{exc.__class__.__name__}: {exc}"[:300])

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        answer: Reply = turn.catalog
        turn.products, turn.filters, turn.sources = answer.products, answer.filters, answer.sources
        if answer.handoff:  # a product photo that found nothing: a person looks at it (the service queues it)
            turn.escalation = (PHOTO, answer.handoff, answer.handed_over)
        turn.served = CATALOG_ROUTE
        turn.finish(CATALOG_ROUTE, answer.text, f"tier: catalog ({answer.kind})")
        yield answer.text
        yield turn
