"""The router chain, in LCEL: guard -> cache -> rules -> score -> threshold -> load gate -> tier.

Each stage is a `RunnableLambda` over one mutable :class:`Turn`; a stage that settles the answer marks the
turn done and later stages pass it through. The last step returns the next runnable (small tier or LLM
tier), which is LCEL's way to route. Every stage appends to ``turn.trace`` and times itself, so the request
log can explain each decision.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
from langchain_core.runnables import Runnable, RunnableLambda

from chains import tiers
from chains.cache import ResponseCache
from chains.features import message_features
from chains.guard import check_input
from chains.routers.base import RouteContext, Router
from chains.rules import TOOLS, RuleBook
from chains.schema import ChatRequest
from storage.settings_store import Thresholds


@dataclass
class Turn:
    request: ChatRequest
    thresholds: Thresholds
    history: list[dict[str, str]] = field(default_factory=list)
    text: str = ""
    query: str = ""                      # what retrieval sees: the text, plus the last turn for follow-ups
    vector: np.ndarray | None = None
    hits: Sequence[Any] = ()
    route: str = ""
    plan: str = ""                       # small | llm | rewrite (for LLM-bound turns)
    answer: str = ""
    draft: tiers.Draft | None = None
    sources: list[dict[str, Any]] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: dict[str, float] = field(default_factory=dict)
    degraded: bool = False
    fallback: bool = False
    cache_hit: bool = False
    kb_version: str = ""
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    done: bool = False

    @property
    def cache_key(self) -> str:
        """Cached answers belong to one KB version and one routing policy: a change to either retires them."""
        return f"{self.kb_version}:{self.thresholds.version}"

    def note(self, stage: str, decision: str, **detail: Any) -> None:
        self.trace.append({"stage": stage, "decision": decision, "detail": detail,
                           "ms": round(self.latency_ms.get(stage, 0.0), 3)})

    def finish(self, route: str, answer: str, reason: str) -> "Turn":
        self.route, self.answer, self.done = route, answer, True
        self.reasons.append(reason)
        return self


@contextmanager
def timed(turn: Turn, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        turn.latency_ms[stage] = turn.latency_ms.get(stage, 0.0) + (time.perf_counter() - start) * 1000


class RouterChain:
    """Holds the parts; `decide` and `generate` are the LCEL runnables built from them."""

    def __init__(self, kb, router: Router, embed, cache: ResponseCache | None, rules: RuleBook | None,
                 llm=None, max_chars: int = 4000, top_k: int = 3, run_tools: bool = True):
        self.kb, self.router, self.embed, self.cache, self.rules, self.llm = kb, router, embed, cache, rules, llm
        self.run_tools = run_tools
        self.max_chars, self.top_k = max_chars, top_k
        stages = [self._guard, self._cache, self._rules, self._score, self._threshold, self._load_gate]
        runnables = [RunnableLambda(stage, name=stage.__name__.strip("_")) for stage in stages]
        # The routing decision alone (no load gate, no generation): what `route-batch` and replay need.
        self.route_only: Runnable = runnables[0]
        for runnable in runnables[1:-1]:
            self.route_only = self.route_only | runnable
        self.decide: Runnable = self.route_only | runnables[-1]
        self.small_tier: Runnable = RunnableLambda(self._small_tier, name="small_tier")
        self.llm_tier: Runnable = RunnableLambda(self._llm_tier, name="llm_tier")
        self.generate: Runnable = RunnableLambda(self._select_tier, name="select_tier")
        self.chain: Runnable = self.decide | self.generate

    # --- stages ------------------------------------------------------------------------------------
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
        if hit is None:
            with timed(turn, "cache"):
                hit = self.cache.lookup(turn.text, turn.vector, turn.cache_key, turn.thresholds.cache_similarity)
        if hit is None:
            turn.note("cache", "miss", entries=len(self.cache))
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
            run = rule is not None and rule.route == "tool" and self.run_tools
            result = TOOLS[rule.tool](turn.text, turn.request.user_id) if run else None
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
            context = RouteContext(vector=turn.vector, hits=turn.hits,
                                   history=[t["content"] for t in turn.history if t["role"] == "user"])
            p_llm = self.router.score(turn.query, context)
        turn.scores.update(p_llm=round(p_llm, 4), kb_top=round(context.kb_top, 4),
                           kb_margin=round(context.kb_margin, 4))
        turn.note("score", f"p_llm={p_llm:.3f}", router=self.router.name, kb_top=round(context.kb_top, 4),
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
        if turn.plan == "llm":
            decision = "llm (rule)"
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

    # --- tiers -------------------------------------------------------------------------------------
    def _select_tier(self, turn: Turn) -> Runnable | Turn:
        if turn.done:
            return turn
        return self.small_tier if turn.plan == "small" else self.llm_tier

    def _small_tier(self, turn: Turn) -> Turn:
        draft = turn.draft or tiers.draft_answer(turn.text, turn.hits)
        turn.sources = draft.sources
        answer = f"{draft.text}\n\n{tiers.DEGRADED_NOTICE}" if turn.degraded else draft.text
        turn.note("tier", "small", sources=[s["answer_id"] for s in draft.sources])
        return turn.finish("small", answer, "tier: small (knowledge-base draft)")

    def llm_request(self, turn: Turn) -> list[dict[str, str]]:
        draft = turn.draft.text if turn.plan == "rewrite" and turn.draft else None
        return tiers.llm_messages(turn.text, turn.hits, turn.history, draft)

    def _llm_tier(self, turn: Turn) -> Turn:
        from chains.llm.client import LLMUnavailable

        try:
            with timed(turn, "generate"):
                result = self.llm.complete(self.llm_request(turn), score=turn.scores.get("p_llm"))
        except LLMUnavailable as exc:
            return self.fall_back(turn, exc.reason)
        return self.finish_llm(turn, result)

    def finish_llm(self, turn: Turn, result) -> Turn:
        turn.model, turn.prompt_tokens, turn.completion_tokens = result.model, result.prompt_tokens, \
            result.completion_tokens
        turn.sources = turn.draft.sources if turn.draft else []
        turn.scores["llm_attempts"] = result.attempts
        turn.note("rewrite" if turn.plan == "rewrite" else "tier", f"llm ({result.tier})", model=result.model,
                  tokens=result.prompt_tokens + result.completion_tokens, ttft_ms=round(result.ttft_ms, 1))
        return turn.finish("llm", result.text.strip() or tiers.NO_ANSWER,
                           "tier: llm rewrite of the draft" if turn.plan == "rewrite" else "tier: llm answer")

    def fall_back(self, turn: Turn, reason: str) -> Turn:
        turn.fallback, turn.error = True, reason
        draft = turn.draft or tiers.draft_answer(turn.text, turn.hits)
        turn.sources = draft.sources
        turn.note("tier", "fallback to small", reason=reason)
        return turn.finish("small", f"{tiers.FALLBACK_NOTICE}\n\n{draft.text}", f"fallback: {reason}")
