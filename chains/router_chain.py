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

from collections.abc import Callable, Iterator

import numpy as np
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda

from chains import tiers
from chains.cache import ResponseCache
from chains.features import message_features
from chains.guard import check_input
from chains.llm.base import LLM, LLMResult, LLMUnavailable
from chains.routers.base import RouteContext, Router
from chains.rules import TOOLS, RuleBook
from chains.schema import Decided
from chains.turn import Turn, timed
from knowledge.base import KnowledgeBase
from storage.db import Database

CACHEABLE_ROUTES = ("small", "llm")
CONNECTION_DROPPED = "\n\n(The connection to our assistant dropped.)\n\n"


class RouterChain:
    """Holds the parts; ``decide``, ``route_only`` and ``chain`` are the LCEL runnables built from them."""

    def __init__(self, *, kb: KnowledgeBase, router: Callable[[], Router], cache: ResponseCache | None,
                 rules: RuleBook | None, llm: LLM | None, db: Database | None,
                 embed: Callable[[str], np.ndarray] | None = None, max_chars: int = 4000, top_k: int = 3,
                 run_tools: bool = True):
        self.kb, self.router, self.cache, self.rules, self.llm, self.db = kb, router, cache, rules, llm, db
        self.embed = embed or kb.encoder.encode_query
        self.run_tools = run_tools and db is not None
        self.max_chars, self.top_k = max_chars, top_k
        stages = [self._guard, self._cache, self._rules, self._score, self._threshold, self._load_gate]
        runnables = [RunnableLambda(stage, name=stage.__name__.strip("_")) for stage in stages]
        # The routing decision alone (no load gate, no generation): what `route-batch` and replay need.
        self.route_only: Runnable = runnables[0]
        for runnable in runnables[1:-1]:
            self.route_only = self.route_only | runnable
        self.decide: Runnable = self.route_only | runnables[-1]
        self.settled_tier: Runnable = RunnableGenerator(self._settled, name="settled")
        self.small_tier: Runnable = RunnableGenerator(self._small_tier, name="small_tier")
        self.llm_tier: Runnable = RunnableGenerator(self._llm_tier, name="llm_tier")
        self.chain: Runnable = (self.decide | RunnableLambda(self._select_tier, name="select_tier")
                                | RunnableGenerator(self._remember, name="remember"))

    # --- the one serving path -----------------------------------------------------------------------
    def stream(self, turn: Turn) -> Iterator[str | Decided | Turn]:
        """The decision (once the route is known), text pieces as they are produced, then the finished Turn."""
        yield from self.chain.stream(turn)

    def invoke(self, turn: Turn) -> Turn:
        final = turn
        for item in self.stream(turn):
            if isinstance(item, Turn):
                final = item
        return final

    # --- deciding stages ----------------------------------------------------------------------------
    def _guard(self, turn: Turn) -> Turn:
        if turn.done:  # refused before the chain (rate limit)
            return turn
        request = turn.request
        with timed(turn, "guard"):
            typed = request.message or ""
            combined = "\n".join(part for part in [typed.strip(), *request.extracted] if part and part.strip())
            result = check_input(combined if combined.strip() else typed, self.max_chars)
        if request.attachment_errors and not result.text:
            turn.note("guard", "refused", reason="attachments unreadable", errors=request.attachment_errors)
            return turn.finish("guard", " ".join(request.attachment_errors), "guard: attachment unreadable")
        if result.refusal:
            turn.note("guard", "refused", reason=result.reason)
            return turn.finish("guard", result.refusal, f"guard: {result.reason}")
        turn.text = turn.query = result.text
        if request.attachment_errors:
            turn.reasons.append("guard: some attachments were unreadable")
        turn.note("guard", "passed", chars=len(result.text))
        return turn

    def _cache(self, turn: Turn) -> Turn:
        if turn.done:
            return turn
        follow_up = bool(turn.history) and message_features(turn.text, True)["follow_up"] > 0
        if follow_up:
            last_user = next((t["content"] for t in reversed(turn.history) if t["role"] == "user"), "")
            turn.query = f"{last_user} {turn.text}".strip()
        turn.kb_version = self.kb.version
        hit = None
        if self.cache is not None and not follow_up:
            with timed(turn, "cache"):
                hit = self.cache.lookup_exact(turn.text, turn.cache_key)
        if hit is None:
            with timed(turn, "embed"):
                turn.vector = self.embed(turn.query)
        if self.cache is None or follow_up:
            turn.note("cache", "skipped", reason="follow-up depends on earlier turns" if follow_up else "disabled")
            return turn
        if hit is None and turn.vector is not None:
            with timed(turn, "cache"):
                hit = self.cache.lookup(turn.text, turn.vector, turn.cache_key, turn.thresholds.cache_similarity)
        if hit is None:
            turn.note("cache", "miss")
            return turn
        turn.cache_hit = True
        turn.sources = list(hit.payload.get("sources", []))
        turn.scores["cache_similarity"] = round(hit.similarity, 4)
        turn.note("cache", f"{hit.kind} hit", similarity=round(hit.similarity, 4), cached_question=hit.source_text)
        return turn.finish("cache", hit.payload["answer"],
                           f"cache: {hit.kind} hit (similarity {hit.similarity:.3f} >= "
                           f"{turn.thresholds.cache_similarity})")

    def _rules(self, turn: Turn) -> Turn:
        if turn.done or self.rules is None:
            return turn
        with timed(turn, "rules"):
            rule = self.rules.match(turn.text)
            run = rule is not None and rule.route == "tool" and self.run_tools and self.db is not None
            result = TOOLS[rule.tool](turn.text, turn.request.user_id, self.db) if run and rule and self.db else None
        if rule is None:
            turn.note("rules", "no rule matched")
            return turn
        turn.note("rules", f"rule '{rule.name}' -> {rule.route}", reason=rule.reason)
        if rule.route == "tool" and result is None:  # batch routing: the decision without the side effect
            return turn.finish("tool", "", f"rule: {rule.name} -> tool {rule.tool} (not run)")
        if result is not None:
            turn.note("tool", rule.tool, **result.detail)
            return turn.finish("tool", result.answer, f"rule: {rule.name} -> tool {rule.tool}")
        turn.plan = rule.route
        turn.reasons.append(f"rule: {rule.name} -> {rule.route}")
        return turn

    def _score(self, turn: Turn) -> Turn:
        if turn.done:
            return turn
        with timed(turn, "retrieve"):
            turn.hits = self.kb.search(turn.query, k=self.top_k, vector=turn.vector)
        with timed(turn, "score"):
            router = self.router()
            context = RouteContext(vector=turn.vector, hits=turn.hits,
                                   history=[t["content"] for t in turn.history if t["role"] == "user"])
            p_llm = router.score(turn.query, context)
        turn.scores.update(p_llm=round(p_llm, 4), kb_top=round(context.kb_top, 4),
                           kb_margin=round(context.kb_margin, 4))
        turn.note("score", f"p_llm={p_llm:.3f}", router=router.name, kb_top=round(context.kb_top, 4),
                  kb_margin=round(context.kb_margin, 4),
                  top_answers=[h.answer_id for h in turn.hits])
        return turn

    def _threshold(self, turn: Turn) -> Turn:
        if turn.done:
            return turn
        tau = turn.thresholds.route_threshold
        p_llm = turn.scores["p_llm"]
        turn.draft = tiers.draft_answer(turn.text, turn.hits)
        quality = tiers.draft_quality(turn.scores["kb_top"], turn.scores["kb_margin"], p_llm, turn.draft.coverage)
        turn.scores["draft_quality"] = round(quality, 4)
        mode = turn.request.mode
        if mode != "routed":  # the caller chose the tier (OpenAI models tandem-small / tandem-llm)
            turn.plan = mode
            decision = f"{mode}: tier chosen by the caller (p_llm {p_llm:.3f}, tau {tau})"
            if mode == "small" and p_llm >= tau:
                turn.no_fit = True
        elif turn.plan in ("llm", "small"):  # an operator's rule decided
            decision = f"{turn.plan} (rule)"
        elif p_llm >= tau:
            turn.plan, decision = "llm", f"llm: p_llm {p_llm:.3f} >= tau {tau}"
        elif quality < turn.thresholds.rewrite_threshold:
            turn.plan = "rewrite"
            decision = (f"rewrite: p_llm {p_llm:.3f} < tau {tau}, but draft quality {quality:.3f} < "
                        f"{turn.thresholds.rewrite_threshold}")
        else:
            turn.plan = "small"
            decision = (f"small: p_llm {p_llm:.3f} < tau {tau}; draft quality {quality:.3f} >= "
                        f"{turn.thresholds.rewrite_threshold}")
        turn.reasons.append(decision)
        turn.note("threshold", decision, tau=tau, rewrite_threshold=turn.thresholds.rewrite_threshold,
                  settings_version=turn.thresholds.version)
        return turn

    def _load_gate(self, turn: Turn) -> Turn:
        if turn.done or turn.plan == "small":
            return turn
        if self.llm is None:
            turn.note("load", "no LLM configured")
            turn.plan = "small"
            turn.reasons.append("no LLM tier in this run: small tier answers")
            return turn
        admitted, why = self.llm.admit(turn.request.user_id)
        turn.note("load", "admitted" if admitted else "degraded", reason=why)
        if not admitted:
            turn.plan, turn.degraded = "small", True
            turn.reasons.append(f"degraded: {why}")
        return turn

    # --- tiers --------------------------------------------------------------------------------------
    def _select_tier(self, turn: Turn) -> Runnable:
        if turn.done:
            return self.settled_tier
        return self.small_tier if turn.plan == "small" else self.llm_tier

    @staticmethod
    def _settled(turns: Iterator[Turn]) -> Iterator[str | Decided | Turn]:
        """Guard, cache and tool answers: already complete; say them at once."""
        for turn in turns:
            yield turn.decided()
            if turn.answer:
                yield turn.answer
            yield turn

    def _small_tier(self, turns: Iterator[Turn]) -> Iterator[str | Decided | Turn]:
        for turn in turns:
            yield turn.decided()
            draft = turn.draft or tiers.draft_answer(turn.text, turn.hits)
            turn.sources = draft.sources
            answer = draft.text
            if turn.no_fit:
                answer = f"{tiers.NO_FIT_NOTICE}\n\n{answer}"
            if turn.degraded:
                answer = f"{answer}\n\n{tiers.DEGRADED_NOTICE}"
            turn.note("tier", "small", sources=[s["answer_id"] for s in draft.sources])
            turn.finish("small", answer, "tier: small (knowledge-base draft)")
            yield answer
            yield turn

    def llm_request(self, turn: Turn) -> list[dict[str, str]]:
        draft = turn.draft.text if turn.plan == "rewrite" and turn.draft else None
        return tiers.llm_messages(turn.text, turn.hits, turn.history, draft)

    def _llm_tier(self, turns: Iterator[Turn]) -> Iterator[str | Decided | Turn]:
        for turn in turns:
            assert self.llm is not None  # the load gate sends no turn here without an LLM
            yield turn.decided()
            produced: list[str] = []
            result: LLMResult | None = None
            request = turn.request
            try:
                with timed(turn, "generate"):
                    for item in self.llm.stream(self.llm_request(turn), score=turn.scores.get("p_llm"),
                                                cancel=turn.cancel, max_tokens=request.max_tokens,
                                                temperature=request.temperature, user_id=request.user_id):
                        if isinstance(item, LLMResult):
                            result = item
                        else:
                            produced.append(item)
                            yield item
            except LLMUnavailable as exc:
                if produced:  # the customer saw a partial answer: say plainly what follows
                    yield CONNECTION_DROPPED
                self.fall_back(turn, exc.reason)
                yield turn.answer
                yield turn
                continue
            if result is None:
                self.fall_back(turn, "LLM stream ended without a result")
                yield turn.answer
            else:
                self.finish_llm(turn, result)
            yield turn

    def finish_llm(self, turn: Turn, result: LLMResult) -> Turn:
        turn.model, turn.prompt_tokens, turn.completion_tokens = result.model, result.prompt_tokens, \
            result.completion_tokens
        turn.sources = turn.draft.sources if turn.draft else []
        turn.scores["llm_attempts"] = result.attempts
        turn.finish_reason = "length" if result.finish_reason == "length" else "stop"
        rewrite = turn.plan == "rewrite"
        turn.note("rewrite" if rewrite else "tier", f"llm ({result.tier})", model=result.model,
                  tokens=result.prompt_tokens + result.completion_tokens, ttft_ms=round(result.ttft_ms, 1),
                  finish_reason=result.finish_reason)
        if result.cancelled:
            turn.cancelled = True
            return turn.finish("llm", result.text.strip(), "cancelled: the customer stopped the answer; the "
                                                           "engine's request was aborted")
        return turn.finish("llm", result.text.strip() or tiers.NO_ANSWER,
                           "tier: llm rewrite of the draft" if rewrite else "tier: llm answer")

    def fall_back(self, turn: Turn, reason: str) -> Turn:
        turn.fallback, turn.error = True, reason
        draft = turn.draft or tiers.draft_answer(turn.text, turn.hits)
        turn.sources = draft.sources
        turn.note("tier", "fallback to small", reason=reason)
        return turn.finish("small", f"{tiers.FALLBACK_NOTICE}\n\n{draft.text}", f"fallback: {reason}")

    # --- after the answer ---------------------------------------------------------------------------
    def _remember(self, items: Iterator[str | Decided | Turn]) -> Iterator[str | Decided | Turn]:
        """Store a complete, ordinary answer in the cache (the chain owns lookup and store alike)."""
        for item in items:
            if isinstance(item, Turn) and self.cache is not None and item.vector is not None and self._cacheable(item):
                with timed(item, "remember"):
                    self.cache.store(item.text, item.vector, item.cache_key,
                                     {"answer": item.answer, "sources": item.sources, "origin": item.route})
            yield item

    def _cacheable(self, turn: Turn) -> bool:
        return (self.cache is not None and turn.route in CACHEABLE_ROUTES and not turn.degraded
                and not turn.fallback and not turn.cache_hit and not turn.cancelled and turn.vector is not None
                and turn.query == turn.text and bool(turn.answer))
