"""The router chain, in LCEL: guard -> cache -> rules -> score -> threshold -> load gate -> tier -> remember.

One path serves every caller. ``stream(turn)`` yields the answer's text as it is produced and then the
finished :class:`~chains.turn.Turn`; ``invoke(turn)`` is the same stream with the text dropped. The HTTP
API, the chat UI, the CLI and batch routing all go through it, so a new stage is added in one place.

The deciding stages are ``RunnableLambda``s over one mutable Turn; a stage that settles the answer marks
the turn done and later stages pass it through. The tier step returns the next runnable (LCEL's way to
route), and LCEL streams whatever that runnable yields. Stages after generation are generators that pass
text through and act on the final Turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda

from chains import answers
from chains.cache import CacheHit, ResponseCache, normalise
from chains.calibration import QualityFloor, quality_floors
from chains.check import AnswerCheck, sources_of
from chains.features import message_features
from chains.forecast import FailureForecast
from chains.guard import check_input
from chains.llm.base import LLM
from chains.routers.base import RouteContext, Router
from chains.rules import RuleBook
from chains.schema import CATALOG_ROUTE, LLM_ROUTE, PREPARE_CHANNEL, SMALL_ROUTE, ChatRequest, Decided, Revised
from chains.tiers import TIERS, Tier, TierParts, cacheable
from chains.tiers.llm import LLMTier
from chains.tiers.small import SmallTier
from chains.turn import Turn, timed
from core.policy import Thresholds
from core.text import language_of
from knowledge.base import KnowledgeBase
from storage import prepared_store
from storage.db import Database

# The cache payload origin of an answer the idle-time worker prepared (ops/prepared.py), and what it may have served:
# LLM text that passed the answer check (an answer) or the rewrite verification (a rewrite of the KB draft).
PREPARED_ORIGIN = "prepared"
PREPARED_SERVED = ("llm", "rewrite")
# The payload origin of what replaced an LLM answer that failed its checks (TANDEM_CACHE_REPLACED_ANSWERS): the next
# customer asking the same gets the same replacement at once, instead of waiting seconds for another answer that a
# model of the same quality will most likely fail again. It never counts as an answer for the idle-time worker.
REPLACED_ORIGIN = "replaced"
REPLACED_SERVED = ("draft_with_caveat", "human_offer")


class RouterChain:
    """Holds the parts; ``route_only`` and ``chain`` are the LCEL runnables built from them."""

    def __init__(self, *, kb: KnowledgeBase, router: Callable[[], Router], cache: ResponseCache | None,
                 rules: RuleBook | None, llm: LLM | None, db: Database | None,
                 embed: Callable[[str], np.ndarray] | None = None, max_chars: int = 4000, top_k: int = 3,
                 run_tools: bool = True, hold_until_checked: bool = False,
                 llm_budget: Callable[[str, int], bool] | None = None, default_max_tokens: int = 96,
                 brand: answers.Brand = answers.DEFAULT_BRAND, remember_replaced: bool = False,
                 stop_when_broken: bool = True, catalog: Any = None, forecast: FailureForecast | None = None,
                 clarify_margins: dict[str, float] | None = None):
        """``hold_until_checked``: an LLM answer is shown only once all of it has passed its checks (else it streams
        as written, and a failed one is replaced after the customer saw part of it). ``llm_budget(client, tokens)``
        takes a turn's tokens from its caller's budget (chains.ratelimit); False sends the turn to the small tier.
        ``brand``: who the answers speak for (the system prompt and the chain's own notices name it).
        ``remember_replaced``: cache what replaced an LLM answer that failed its checks (REPLACED_ORIGIN).
        ``stop_when_broken``: stop generating an answer once its finished sentences hold a defect that no later
        text removes (chains.settled.settled_defect). ``catalog``: the product catalog (catalog.live.LiveCatalog) the
        catalog step answers product messages from; None (or a catalog with no products): no catalog step.
        ``forecast``: offers a person at once when the LLM's answer is predicted to fail (chains/forecast.py).
        ``clarify_margins``: by language, the small tier asks which answer is meant when the best two are closer
        (absent or 0: never)."""
        self.brand, self.remember_replaced, self.forecast = brand, remember_replaced, forecast
        self.kb, self.router, self.cache, self.rules, self.llm, self.db = kb, router, cache, rules, llm, db
        # Through the KB, not bound once: a KB follows a newly tuned encoder, and picks the encoder of the
        # message's language; the query must be embedded by the one it will be searched with.
        self.embed = embed or (lambda text: self.kb.encoder_for(text).encode_query(text))
        # Per KB version and router: each vector space's draft-quality floor (computed once, in about 0.2 s).
        self._floors: dict[tuple[str, str], dict[str, QualityFloor]] = {}
        self._floors_lock = threading.Lock()
        self.max_chars, self.top_k, self.hold_until_checked = max_chars, top_k, hold_until_checked
        self.llm_budget, self.default_max_tokens = llm_budget, default_max_tokens
        guard, lookup, rules_step, score, threshold, load_gate = (
            RunnableLambda(stage, name=stage.__name__.strip("_"))
            for stage in (self._guard, self._cache, self._rules, self._score, self._threshold, self._load_gate))
        # The routing decision alone (no load gate, no generation): what `route-batch` and replay need.
        self.route_only: Runnable = guard | lookup | rules_step | score | threshold
        # Serving: a turn the guard or the cache settled goes straight to the settled tier; every LCEL step costs
        # ~0.1 ms of callback and signature bookkeeping, and the five it skips were a quarter of a cache hit.
        # The registered tiers (chains/tiers), each behind one runnable; the threshold stage's plan names one.
        parts = TierParts(llm=llm, hold_until_checked=hold_until_checked, stop_when_broken=stop_when_broken,
                          router=router, kb=kb, brand=brand, db=db if run_tools else None, catalog=catalog,
                          clarify_margins=clarify_margins or {})
        self.tiers: dict[str, Tier] = {name: tier(parts) for name, tier in TIERS.items()}
        self.tier_of_plan = {plan: name for name, tier in self.tiers.items() for plan in tier.plans}
        small = self.tiers[SMALL_ROUTE]
        assert isinstance(small, SmallTier)
        self.small_tier = small  # its question "which one?" reaches the guard, the threshold and the cache
        self.tier_runnables: dict[str, Runnable] = {
            name: RunnableGenerator(self._runner(tier), name=f"{name}_tier") for name, tier in self.tiers.items()}
        unsettled: Runnable = (rules_step | score | threshold | load_gate
                               | RunnableLambda(self._select_tier, name="select_tier")
                               | RunnableGenerator(self._remember, name="remember"))
        # The catalog step, before the cache: a product message it claims is never looked up there (catalog answers
        # are not cached, so no cached answer of another tier stands in for one). Not in route_only: batch routing
        # and replay keep deciding between the help center and the LLM.
        catalog_step = RunnableLambda(self._catalog, name="catalog")
        self.chain: Runnable = guard | catalog_step | lookup | RunnableLambda(
            lambda turn: self.tier_runnables["answered"] if turn.done else unsettled, name="settled_or_route")

    # --- the one serving path -----------------------------------------------------------------------
    def stream(self, turn: Turn) -> Iterator[str | Decided | Revised | Turn]:
        """The decision (once the route is known), text pieces as they are produced, then the finished Turn."""
        yield from self.chain.stream(turn)

    def invoke(self, turn: Turn) -> Turn:
        final = turn
        for item in self.stream(turn):
            if isinstance(item, Turn):
                final = item
        return final

    def check_message(self, turn: Turn) -> Turn:
        """The guard alone: a message to a conversation a person holds is refused like any other, or passed on
        unanswered (chains/service.py)."""
        return self._guard(turn)

    # --- deciding stages ----------------------------------------------------------------------------
    def _guard(self, turn: Turn) -> Turn:
        if turn.done:  # refused before the chain (rate limit)
            return turn
        request = turn.request
        with timed(turn, "guard"):
            typed = request.message or ""
            combined = "\n".join(part for part in [typed.strip(), *request.extracted] if part and part.strip())
            if not combined and (codes := [c for photo in request.photos for c in photo.codes]):
                combined = " ".join(f"barcode {code}" for code in codes)  # a photo of a barcode and nothing else
            result = check_input(combined if combined.strip() else typed, self.max_chars)
        if request.attachment_errors and not result.text:
            turn.note("guard", "refused", reason="attachments unreadable", errors=request.attachment_errors)
            return turn.finish("guard", " ".join(request.attachment_errors), "guard: attachment unreadable",
                               "attachment_unreadable")
        if result.refusal:
            turn.note("guard", "refused", reason=result.reason)
            return turn.finish("guard", result.refusal, f"guard: {result.reason}", result.code)
        turn.text = turn.query = result.text
        turn.language = language_of(turn.text)  # once per turn: notices, floors and prompts read it from here
        if request.attachment_errors:
            turn.reasons.append("guard: some attachments were unreadable")
        turn.note("guard", "passed", chars=len(result.text))
        self._typed_choice(turn)
        return turn

    def _typed_choice(self, turn: Turn) -> None:
        """A choice's number typed back after the small tier asked "which one?" is that choice's click: answered
        from it, never from the catalog or the cache (chains/tiers/small.py)."""
        if turn.request.suggestion or not turn.history:
            return
        picked = self.small_tier.number_picked(turn)
        if picked:
            turn.request = turn.request.model_copy(update={"suggestion": picked})
            turn.note("suggest", "number typed", choice=picked)

    def _cache(self, turn: Turn) -> Turn:
        if turn.done:
            return turn
        follow_up = bool(turn.history) and message_features(turn.text, True)["follow_up"] > 0
        # answered by the customer's pick, or from the catalog (advice on its products too): never cached
        chose = turn.request.names_answer or turn.plan == CATALOG_ROUTE or turn.advice is not None
        skip = follow_up or chose or turn.past_cache
        if follow_up:
            last_user = next((t["content"] for t in reversed(turn.history) if t["role"] == "user"), "")
            turn.query = f"{last_user} {turn.text}".strip()
        self._key_parts(turn)
        hit = None
        if self.cache is not None and not skip:
            with timed(turn, "cache"):
                hit = self._vouched(turn, self.cache.lookup_exact(turn.text, turn.cache_key))
        if hit is None:
            with timed(turn, "embed"):
                turn.search_text = self.kb.search_text(turn.query)
                turn.vector = self.embed(turn.search_text)
            if turn.search_text != turn.query.strip():
                turn.note("embed", "searched as mended", search_text=turn.search_text)
        if self.cache is None or skip:
            turn.note("cache", "skipped", reason="follow-up depends on earlier turns" if follow_up else
                      "a catalog answer" if turn.plan == CATALOG_ROUTE or turn.advice is not None else
                      "a clicked suggested reply" if chose else
                      "deciding past the cache" if turn.past_cache else "disabled")
            return turn
        if hit is None and turn.vector is not None:
            with timed(turn, "cache"):
                hit = self._vouched(turn, self.cache.lookup(turn.text, turn.vector, turn.cache_key,
                                                            turn.thresholds.cache_similarity))
        if hit is None:
            turn.note("cache", "miss")
            return turn
        turn.cache_hit = True
        turn.cache_origin = str(hit.payload.get("origin", ""))
        if turn.cache_origin == REPLACED_ORIGIN:  # what the customer reads: the same replacement as last time
            turn.served = str(hit.payload.get("served", ""))
        turn.cache_entry = (turn.cache_key, normalise(hit.source_text))
        turn.sources = list(hit.payload.get("sources", []))
        turn.scores["cache_similarity"] = round(hit.similarity, 4)
        turn.note("cache", f"{hit.kind} hit", similarity=round(hit.similarity, 4), cached_question=hit.source_text,
                  origin=turn.cache_origin)
        return turn.finish("cache", hit.payload["answer"],
                           f"cache: {hit.kind} hit (similarity {hit.similarity:.3f} >= "
                           f"{turn.thresholds.cache_similarity})")

    def _key_parts(self, turn: Turn) -> None:
        """What the turn's cache key is made of: the KB version, the routing version and the vector space."""
        turn.kb_version = self.kb.version
        # One router for the whole turn (cache key, score, draft quality, floors): a reload lands between turns.
        turn.router = self.router()
        turn.routing_version = (f"{turn.router.fingerprint}."
                                f"{self.rules.current_version() if self.rules is not None else '-'}")
        turn.space = self.kb.space_for(turn.query)

    def cache_namespace(self, request: ChatRequest, thresholds: Thresholds) -> str:
        """The cache key a new conversation's message would be looked up under now (the idle-time worker asks
        whether a question already has a fresh answer without sending it)."""
        turn = Turn(request=request, thresholds=thresholds, text=request.message, query=request.message)
        self._key_parts(turn)
        return turn.cache_key

    def _vouched(self, turn: Turn, hit: CacheHit | None) -> CacheHit | None:
        """A prepared answer is served only while its record stands (an operator may have deleted it in the
        console, which may not share this process's cache): else its entry is dropped and the turn goes on.
        The idle-time worker is never served a remembered replacement: it asks to get the answer that replaces it."""
        if hit is not None and hit.payload.get("origin") == REPLACED_ORIGIN and turn.request.channel == PREPARE_CHANNEL:
            turn.note("cache", "remembered replacement passed over", cached_question=hit.source_text)
            return None
        if hit is None or hit.payload.get("origin") != PREPARED_ORIGIN or self.db is None or self.cache is None:
            return hit
        if prepared_store.vouched(self.db, turn.cache_key, normalise(hit.source_text)):
            return hit
        self.cache.forget(hit.source_text, turn.cache_key)
        turn.note("cache", "prepared answer withdrawn", cached_question=hit.source_text)
        return None

    def _catalog(self, turn: Turn) -> Turn:
        """A product message the catalog answers (chains/tiers/catalog.py) gets the plan "catalog"; else nothing."""
        tier = self.tiers.get(CATALOG_ROUTE)
        if tier is not None and hasattr(tier, "claim"):
            tier.claim(turn)
        return turn

    def _rules(self, turn: Turn) -> Turn:
        if turn.done or self.rules is None:
            return turn
        with timed(turn, "rules"):
            rule = self.rules.match(turn.text)
        if rule is None:
            turn.note("rules", "no rule matched")
            return turn
        turn.note("rules", f"rule '{rule.name}' -> {rule.route}", reason=rule.reason)
        turn.rule, turn.plan = rule, rule.route
        turn.reasons.append(f"rule: {rule.name} -> {rule.route}" + (f" {rule.tool}" if rule.tool else ""))
        return turn

    def _ruled_only(self, turn: Turn) -> bool:
        """A rule named a tier that needs no retrieval, score or threshold (the tool, the handoff)."""
        tier = self.tiers.get(self.tier_of_plan.get(turn.plan, ""))
        return (turn.rule is not None or turn.plan == CATALOG_ROUTE) and tier is not None and tier.ruled_only

    def _score(self, turn: Turn) -> Turn:
        if turn.done or self._ruled_only(turn):
            return turn
        evidence: dict[str, float] = {}
        with timed(turn, "retrieve"):
            turn.hits = self.kb.search(turn.search_text or turn.query, k=self.top_k, vector=turn.vector,
                                       evidence=evidence)
        with timed(turn, "score"):
            router = turn.router
            turn.context = RouteContext(vector=turn.vector, hits=turn.hits, evidence=evidence,
                                        history=[t["content"] for t in turn.history if t["role"] == "user"])
            p_llm = router.score(turn.query, turn.context)
        turn.scores.update(p_llm=round(p_llm, 4), kb_top=round(turn.context.kb_top, 4),
                           kb_margin=round(turn.context.kb_margin, 4),
                           **{k: round(v, 4) for k, v in evidence.items()})
        turn.note("score", f"p_llm={p_llm:.3f}", router=router.name, kb_top=round(turn.context.kb_top, 4),
                  kb_margin=round(turn.context.kb_margin, 4), dense_z=round(evidence.get("dense_z", 0.0), 3),
                  top_answers=[h.answer_id for h in turn.hits])
        return turn

    def _threshold(self, turn: Turn) -> Turn:
        if turn.done or self._ruled_only(turn):
            return turn
        tau = turn.thresholds.route_threshold
        p_llm = turn.scores["p_llm"]
        turn.draft = answers.draft_answer(turn.text, turn.hits, self.brand)
        learned = turn.router.draft_quality(turn.context, turn.draft.coverage) if turn.context else None
        quality = learned if learned is not None else answers.draft_quality(
            turn.scores["kb_top"], turn.scores["kb_margin"], p_llm, turn.draft.coverage)
        turn.scores["draft_quality"] = round(quality, 4)
        rewrite_below = self.rewrite_threshold(turn)
        mode = turn.request.mode
        if mode != "routed":  # the caller chose the tier (OpenAI models tandem-small / tandem-llm)
            turn.plan = mode
            decision = f"{mode}: tier chosen by the caller (p_llm {p_llm:.3f}, tau {tau})"
            if mode == SMALL_ROUTE and p_llm >= tau:  # mode small: the KB tier only, whatever the score
                turn.no_fit = True
        elif turn.plan in (LLM_ROUTE, SMALL_ROUTE):  # an operator's rule decided
            decision = f"{turn.plan} (rule)"
        elif p_llm >= tau:
            turn.plan, decision = "llm", f"llm: p_llm {p_llm:.3f} >= tau {tau}"
        elif quality < rewrite_below and self.small_tier.choices(turn):
            turn.plan = SMALL_ROUTE  # a rewrite would reword a draft that may answer the other question
            decision = (f"small: p_llm {p_llm:.3f} < tau {tau}, draft quality {quality:.3f} < {rewrite_below}, but "
                        f"the best two answers are {turn.scores['kb_margin']:.3f} apart: ask which one is meant")
        elif quality < rewrite_below:
            turn.plan = "rewrite"
            decision = f"rewrite: p_llm {p_llm:.3f} < tau {tau}, but draft quality {quality:.3f} < {rewrite_below}"
        else:
            turn.plan = SMALL_ROUTE
            decision = f"small: p_llm {p_llm:.3f} < tau {tau}; draft quality {quality:.3f} >= {rewrite_below}"
        turn.reasons.append(decision)
        turn.note("threshold", decision, tau=tau, rewrite_threshold=turn.thresholds.rewrite_threshold,
                  kb_rewrite_floor=rewrite_below, settings_version=turn.thresholds.version)
        claim = next(filter(None, (tier.claims(turn) for tier in self.tiers.values())), None)
        if claim is not None:  # a tier takes the turn over (small: a clicked suggested reply)
            turn.plan = claim[0]
            turn.reasons.append(claim[1])
        return turn

    def quality_floors(self, kb_version: str = "", router: Router | None = None) -> dict[str, QualityFloor]:
        """The KB's draft-quality floors under ``router`` (default: the current one), computed on first use of a KB
        version (the app calls this while warming up, so no customer waits for it)."""
        router = router or self.router()
        key = (kb_version or self.kb.version, router.fingerprint)
        floors = self._floors.get(key)
        if floors is None:
            with self._floors_lock:
                floors = self._floors.get(key)
                if floors is None:
                    floors = self._floors[key] = quality_floors(self.kb, router)
        return floors

    def rewrite_threshold(self, turn: Turn) -> float:
        """The operator's rewrite threshold, lowered to this KB's floor for the message's language: the draft
        quality under which only 2 % of the KB's own right drafts in that language fall (chains/calibration.py).
        The floor is logged with the scores, so the ops tuner models what the chain does."""
        floor = self.quality_floors(turn.kb_version, turn.router).get(turn.language)
        if floor is None:
            return turn.thresholds.rewrite_threshold
        turn.scores["kb_rewrite_floor"] = floor.value
        return min(turn.thresholds.rewrite_threshold, floor.value)

    def _load_gate(self, turn: Turn) -> Turn:
        if turn.done or self.tier_of_plan.get(turn.plan, "llm") != "llm":  # no LLM call: nothing to admit
            return turn
        if self.llm is None:
            turn.note("load", "no LLM configured")
            turn.plan = SMALL_ROUTE
            turn.reasons.append("no LLM tier in this run: small tier answers")
            return turn
        llm_tier = self.tiers["llm"]
        if self.forecast is not None and isinstance(llm_tier, LLMTier) \
                and self.forecast.claim(turn, llm_tier.draft_fits, self.brand):
            return turn  # no LLM call for the customer: the LLM tier answers in the background (chains/background.py)
        admitted, why = self.llm.admit(turn.request.customer)
        if admitted and self.llm_budget is not None:
            tokens = turn.request.max_tokens or self.default_max_tokens
            if not self.llm_budget(turn.request.client, tokens):
                admitted, why = False, "this caller's LLM token budget for the minute is spent"
        turn.note("load", "admitted" if admitted else "degraded", reason=why)
        if not admitted:
            turn.plan, turn.degraded = SMALL_ROUTE, True
            turn.reasons.append(f"degraded: {why}")
        return turn

    # --- tiers --------------------------------------------------------------------------------------
    def _select_tier(self, turn: Turn) -> Runnable:
        """The registered tier that serves the turn's plan (chains/tiers); a settled turn is already answered."""
        if turn.done:
            return self.tier_runnables["answered"]
        return self.tier_runnables[self.tier_of_plan.get(turn.plan, "llm")]

    def _runner(self, tier: Tier) -> Callable[[Iterator[Turn]], Iterator[str | Decided | Revised | Turn]]:
        def run(turns: Iterator[Turn]) -> Iterator[str | Decided | Revised | Turn]:
            for turn in turns:
                yield turn.decided(tier.name)
                yield from tier.answer(turn)
        return run

    def llm_request(self, turn: Turn) -> list[dict[str, str]]:
        """The messages the LLM tier would send for this turn (bench and experiments read them)."""
        tier = self.tiers["llm"]
        assert isinstance(tier, LLMTier)
        return tier.llm_request(turn)

    # --- after the answer ---------------------------------------------------------------------------
    def _remember(self, items: Iterator[str | Decided | Revised | Turn]) -> Iterator[str | Decided | Revised | Turn]:
        """Store a complete, ordinary answer in the cache (the chain owns lookup and store alike)."""
        for item in items:
            if isinstance(item, Turn) and self.cache is not None and item.vector is not None:
                payload: dict[str, Any] | None = None
                if self._cacheable(item):
                    origin = PREPARED_ORIGIN if item.request.channel == PREPARE_CHANNEL else item.route
                    payload = {"answer": item.answer, "sources": item.sources, "origin": origin}
                elif self._replaced_and_remembered(item):
                    payload = {"answer": item.answer, "sources": item.sources, "origin": REPLACED_ORIGIN,
                               "served": item.served}
                if payload is not None:
                    with timed(item, "remember"):
                        if payload["origin"] == PREPARED_ORIGIN:  # a passing answer takes a replacement's place
                            self._forget_replacement(item)
                        stored = self.cache.store(item.text, item.vector, item.cache_key, payload)
                    item.note("remember", "stored" if stored else "not stored", origin=payload["origin"],
                              namespace=item.cache_key)
            yield item

    def _cacheable(self, turn: Turn) -> bool:
        if turn.request.channel == PREPARE_CHANNEL and (turn.route != LLM_ROUTE or turn.served not in PREPARED_SERVED):
            return False  # the idle-time worker stores LLM text that passed its checks, nothing else
        return (self.cache is not None and cacheable(turn.route) and not turn.degraded and turn.advice is None
                and not turn.fallback and not turn.cache_hit and not turn.cancelled and turn.vector is not None
                and not self._close_call(turn)
                # an answer the check had to change is not repeated to the next customer: it is generated anew
                and not turn.findings and turn.query == turn.text and bool(turn.answer) and not turn.request.names_answer
                and not (turn.route == "llm" and self._leans_on_the_conversation(turn)))

    def _close_call(self, turn: Turn) -> bool:
        """A small-tier turn whose best two answers were close enough to ask which one is meant: what it served (the
        question, or the best draft when the question was just asked) depends on the conversation, so it is not
        repeated to the next customer."""
        return turn.route == SMALL_ROUTE and self.small_tier.close_call(turn)

    def _forget_replacement(self, turn: Turn) -> None:
        assert self.cache is not None
        held = self.cache.lookup_exact(turn.text, turn.cache_key)
        if held is not None and held.payload.get("origin") == REPLACED_ORIGIN:
            self.cache.forget(turn.text, turn.cache_key)

    def _replaced_and_remembered(self, turn: Turn) -> bool:
        """An LLM answer (not a rewrite) to a customer's own new message that failed its checks and was replaced by
        our own text: the KB draft with a caveat, or the offer of a person. Not a failure of the engine (a fallback:
        the next try may well work), not a handoff the policy ordered, nothing the idle-time worker asked."""
        return (self.remember_replaced and turn.route == LLM_ROUTE and turn.plan == LLM_ROUTE and turn.advice is None
                and turn.served in REPLACED_SERVED and bool(turn.findings) and not turn.handoff
                and turn.request.channel != PREPARE_CHANNEL and not turn.degraded and not turn.fallback
                and not turn.cache_hit and not turn.cancelled and turn.query == turn.text and bool(turn.answer)
                and not turn.request.names_answer)

    @staticmethod
    def _leans_on_the_conversation(turn: Turn) -> bool:
        """Whether the answer makes a claim that only the customer's own words vouch for: the answer check accepts a
        claim found in the message or the history (a customer may name their own link or amount), but an OpenAI
        client writes the history itself, so a forged assistant turn would otherwise reach every later customer
        through the shared cache. Cached answers stand on the help center alone."""
        help_center = AnswerCheck(sources_of(turn.hits, turn.draft.text if turn.draft else "", "", []), "")
        return bool(help_center.unsupported(turn.answer))

