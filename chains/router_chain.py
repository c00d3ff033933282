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
import time
from collections.abc import Callable, Iterator

import numpy as np
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda

from chains import answers
from chains.cache import ResponseCache
from chains.calibration import QualityFloor, quality_floors
from chains.check import CLAIM_KINDS, STAND_INS, AnswerCheck, StreamChecker, sources_of
from chains.features import message_features
from chains.guard import check_input
from chains.llm.base import LLM, LLMResult, LLMUnavailable
from chains.routers.base import RouteContext, Router
from chains.rules import TOOLS, RuleBook
from chains.schema import Decided, Revised
from chains.turn import Turn, timed
from chains.verify import Defect, defects, rewrite_verdict
from core.text import language_of
from knowledge.base import KnowledgeBase
from storage.db import Database

CACHEABLE_ROUTES = ("small", "llm")
# Defects that make an LLM answer unfit to show (claims and language have policies of their own in the check).
BROKEN_KINDS = ("echo", "narration", "refusal", "cut_off", "empty", "ungrounded")
CONNECTION_DROPPED = "\n\n(The connection to our assistant dropped.)\n\n"


class RouterChain:
    """Holds the parts; ``route_only`` and ``chain`` are the LCEL runnables built from them."""

    def __init__(self, *, kb: KnowledgeBase, router: Callable[[], Router], cache: ResponseCache | None,
                 rules: RuleBook | None, llm: LLM | None, db: Database | None,
                 embed: Callable[[str], np.ndarray] | None = None, max_chars: int = 4000, top_k: int = 3,
                 run_tools: bool = True, hold_until_checked: bool = False,
                 llm_budget: Callable[[str, int], bool] | None = None, default_max_tokens: int = 96):
        """``hold_until_checked``: an LLM answer is shown only once all of it has passed its checks (else it streams
        as written, and a failed one is replaced after the customer saw part of it). ``llm_budget(client, tokens)``
        takes a turn's tokens from its caller's budget (chains.ratelimit); False sends the turn to the small tier."""
        self.kb, self.router, self.cache, self.rules, self.llm, self.db = kb, router, cache, rules, llm, db
        # Through the KB, not bound once: a KB follows a newly tuned encoder, and picks the encoder of the
        # message's language; the query must be embedded by the one it will be searched with.
        self.embed = embed or (lambda text: self.kb.encoder_for(text).encode_query(text))
        self.run_tools = run_tools and db is not None
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
        self.settled_tier: Runnable = RunnableGenerator(self._settled, name="settled")
        self.small_tier: Runnable = RunnableGenerator(self._small_tier, name="small_tier")
        self.llm_tier: Runnable = RunnableGenerator(self._llm_tier, name="llm_tier")
        unsettled: Runnable = (rules_step | score | threshold | load_gate
                               | RunnableLambda(self._select_tier, name="select_tier")
                               | RunnableGenerator(self._remember, name="remember"))
        self.chain: Runnable = guard | lookup | RunnableLambda(
            lambda turn: self.settled_tier if turn.done else unsettled, name="settled_or_route")

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
        return turn

    def _cache(self, turn: Turn) -> Turn:
        if turn.done:
            return turn
        follow_up = bool(turn.history) and message_features(turn.text, True)["follow_up"] > 0
        if follow_up:
            last_user = next((t["content"] for t in reversed(turn.history) if t["role"] == "user"), "")
            turn.query = f"{last_user} {turn.text}".strip()
        turn.kb_version = self.kb.version
        # One router for the whole turn (cache key, score, draft quality, floors): a reload lands between turns.
        turn.router = self.router()
        turn.routing_version = (f"{turn.router.fingerprint}."
                                f"{self.rules.current_version() if self.rules is not None else '-'}")
        turn.space = self.kb.space_for(turn.query)
        hit = None
        if self.cache is not None and not follow_up:
            with timed(turn, "cache"):
                hit = self.cache.lookup_exact(turn.text, turn.cache_key)
        if hit is None:
            with timed(turn, "embed"):
                turn.search_text = self.kb.search_text(turn.query)
                turn.vector = self.embed(turn.search_text)
            if turn.search_text != turn.query.strip():
                turn.note("embed", "searched as mended", search_text=turn.search_text)
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
            # The signed customer only: an unsigned user_id is a label anyone can type.
            result = TOOLS[rule.tool](turn.text, turn.request.customer, self.db) if run and rule and self.db else None
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
        if turn.done:
            return turn
        tau = turn.thresholds.route_threshold
        p_llm = turn.scores["p_llm"]
        turn.draft = answers.draft_answer(turn.text, turn.hits)
        learned = turn.router.draft_quality(turn.context, turn.draft.coverage) if turn.context else None
        quality = learned if learned is not None else answers.draft_quality(
            turn.scores["kb_top"], turn.scores["kb_margin"], p_llm, turn.draft.coverage)
        turn.scores["draft_quality"] = round(quality, 4)
        rewrite_below = self.rewrite_threshold(turn)
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
        elif quality < rewrite_below:
            turn.plan = "rewrite"
            decision = f"rewrite: p_llm {p_llm:.3f} < tau {tau}, but draft quality {quality:.3f} < {rewrite_below}"
        else:
            turn.plan = "small"
            decision = f"small: p_llm {p_llm:.3f} < tau {tau}; draft quality {quality:.3f} >= {rewrite_below}"
        turn.reasons.append(decision)
        turn.note("threshold", decision, tau=tau, rewrite_threshold=turn.thresholds.rewrite_threshold,
                  kb_rewrite_floor=rewrite_below, settings_version=turn.thresholds.version)
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
        if turn.done or turn.plan == "small":
            return turn
        if self.llm is None:
            turn.note("load", "no LLM configured")
            turn.plan = "small"
            turn.reasons.append("no LLM tier in this run: small tier answers")
            return turn
        admitted, why = self.llm.admit(turn.request.customer)
        if admitted and self.llm_budget is not None:
            tokens = turn.request.max_tokens or self.default_max_tokens
            if not self.llm_budget(turn.request.client, tokens):
                admitted, why = False, "this caller's LLM token budget for the minute is spent"
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
    def _settled(turns: Iterator[Turn]) -> Iterator[str | Decided | Revised | Turn]:
        """Guard, cache and tool answers: already complete; say them at once."""
        for turn in turns:
            yield turn.decided()
            if turn.answer:
                yield turn.answer
            yield turn

    def _small_tier(self, turns: Iterator[Turn]) -> Iterator[str | Decided | Revised | Turn]:
        for turn in turns:
            yield turn.decided()
            draft = turn.draft or answers.draft_answer(turn.text, turn.hits)
            turn.sources = draft.sources
            answer = draft.text
            if turn.no_fit:
                answer = f"{answers.NOTICES[turn.language].no_fit}\n\n{answer}"
            if turn.degraded:
                answer = f"{answer}\n\n{answers.NOTICES[turn.language].degraded}"
            turn.note("tier", "small", sources=[s["answer_id"] for s in draft.sources])
            turn.finish("small", answer, "tier: small (knowledge-base draft)")
            yield answer
            yield turn

    def llm_request(self, turn: Turn) -> list[dict[str, str]]:
        draft = turn.draft.body if turn.plan == "rewrite" and turn.draft else None
        return answers.llm_messages(turn.text, turn.hits, turn.history, draft)

    def _llm_tier(self, turns: Iterator[Turn]) -> Iterator[str | Decided | Revised | Turn]:
        """Generate, then check. An answer streams out through the answer check (chains/check.py); a rewrite is
        verified against its draft (chains/verify.py) while the customer already reads the draft."""
        for turn in turns:
            yield turn.decided()
            if turn.plan == "rewrite":
                yield from self._rewritten(turn)
            else:
                yield from self._checked(turn, self._generate(turn))

    def _generate(self, turn: Turn) -> Iterator[str | LLMResult]:
        assert self.llm is not None  # the load gate sends no turn here without an LLM
        request = turn.request
        with timed(turn, "generate"):
            yield from self.llm.stream(self.llm_request(turn), score=turn.scores.get("p_llm"), cancel=turn.cancel,
                                       max_tokens=request.max_tokens, temperature=request.temperature,
                                       user_id=request.customer)

    def _rewritten(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        """The draft at once; the rewrite replaces it only if it keeps every key fact of the draft, contradicts
        none, has no customer-visible defect and adds more than words. Otherwise the draft stands."""
        draft = self._draft(turn)
        yield draft.text
        result: LLMResult | None = None
        try:
            for item in self._generate(turn):
                if isinstance(item, LLMResult):
                    result = item
        except LLMUnavailable as exc:
            yield self._draft_stands(turn, exc.reason)
            return
        if result is None:
            yield self._draft_stands(turn, "LLM stream ended without a result")
            return
        self.finish_llm(turn, result)
        rewrite = result.text.strip()
        if result.cancelled:
            turn.answer, turn.served = draft.text, "draft"  # what the customer saw before pressing Stop
            yield turn
            return
        with timed(turn, "verify"):
            verdict = rewrite_verdict(draft.body, rewrite, message=turn.text, finish_reason=result.finish_reason,
                                      sources=[draft.body, turn.text])
        if verdict.accepted:
            turn.answer, turn.served = rewrite + draft.text[len(draft.body):], "rewrite"  # keeps the citations
            turn.note("verify", "rewrite accepted")
            yield Revised(text=turn.answer)
        else:
            turn.answer, turn.served, turn.rejected_text = draft.text, "draft", rewrite
            turn.findings.append({"kind": "rewrite_rejected", "value": verdict.reason.split(":")[0], "action": "draft",
                                  "detail": verdict.reason})
            turn.reasons.append(f"rewrite rejected ({verdict.reason}): the knowledge-base draft is served")
            turn.note("verify", "rewrite rejected", reason=verdict.reason)  # the text itself: operators only
        yield turn

    def _draft_stands(self, turn: Turn, reason: str) -> Turn:
        """The LLM failed while the customer was reading the draft: the draft is the answer."""
        turn.fallback, turn.error = True, reason
        draft = self._draft(turn)
        turn.sources = draft.sources
        turn.note("tier", "fallback to small", reason=reason)
        return turn.finish("small", draft.text, f"fallback: {reason}")

    def _checked(self, turn: Turn, generated: Iterator[str | LLMResult]) -> Iterator[str | Revised | Turn]:
        """Pass the answer on through the check; apply the operator's policy to what it finds. An answer the check
        escalated, or one with a customer-visible defect (chains/verify.py), is replaced whole: never what is left
        of the broken text."""
        check = AnswerCheck(sources_of(turn.hits, turn.draft.text if turn.draft else "", turn.text, turn.history),
                            turn.text, turn.thresholds.check_actions, answers.SYSTEM_PROMPT)
        stream = StreamChecker(check)
        result: LLMResult | None = None
        check_ms = 0.0
        try:
            for item in generated:
                if isinstance(item, LLMResult):
                    result = item
                    continue
                started = time.perf_counter()
                shown = stream.feed(item)
                check_ms += (time.perf_counter() - started) * 1000
                if shown and not self.hold_until_checked:
                    yield shown
                if stream.stopped:  # an escalating finding: stop generating what will not be shown
                    turn.cancel.set()
        except LLMUnavailable as exc:
            if stream.shown_text and not self.hold_until_checked:  # the customer saw a partial answer: say so
                yield CONNECTION_DROPPED
            self.fall_back(turn, exc.reason)
            yield turn.answer
            yield turn
            return
        if result is None:
            self.fall_back(turn, "LLM stream ended without a result")
            yield turn.answer
            yield turn
            return
        started = time.perf_counter()
        rest = stream.close()
        cancelled_by_check = stream.stopped and result.cancelled
        verdict = check.finish(stream.raw_text if cancelled_by_check else result.text,
                               "stop" if cancelled_by_check else result.finish_reason)
        findings = stream.findings + [f for f in verdict.findings if f.kind not in CLAIM_KINDS]
        self.finish_llm(turn, result.model_copy(update={"cancelled": result.cancelled and not cancelled_by_check}))
        kept = "" if turn.cancelled else _cleaned(stream.shown_text, verdict.text, findings)
        # What the answer was written from (the message grounds nothing), and the check's own stand-in words
        context = [h.answer for h in turn.hits] + list(STAND_INS.values())
        broken = [] if turn.cancelled or stream.stopped else _broken(kept, turn.text, findings, context)
        check_ms += (time.perf_counter() - started) * 1000
        turn.latency_ms["check"] = round(check_ms, 3)
        if rest and not broken and not self.hold_until_checked:
            yield rest
        turn.findings = [f.as_dict() for f in findings] + [
            {"kind": d.kind, "value": d.detail[:120], "action": "draft", "detail": "customer-visible defect"}
            for d in broken if d.kind not in {f.kind for f in findings}]
        escalate = stream.stopped or verdict.replace_with_draft or verdict.handoff or bool(broken)
        if escalate:
            turn.handoff = verdict.handoff or any(f.action == "handoff" for f in findings)
            turn.rejected_text = result.text.strip()
            turn.answer, turn.served, turn.sources = self._instead(turn)
            yield Revised(text=turn.answer)
        elif turn.cancelled:  # what the customer saw before pressing Stop
            turn.answer = "" if self.hold_until_checked else stream.shown_text.strip()
        else:
            if findings:
                turn.answer = kept
            if self.hold_until_checked:  # checked whole: now it may be shown
                yield turn.answer
        decision = (f"{len(turn.findings)} finding(s): " + ", ".join(f"{f['kind']}->{f['action']}"
                                                                     for f in turn.findings)
                    if turn.findings else "no unsupported claim")
        turn.note("check", decision, findings=turn.findings, escalated=escalate)
        yield turn

    def _instead(self, turn: Turn) -> tuple[str, str, list[dict]]:
        """What replaces an LLM answer that failed its checks: a colleague when the policy says so, the knowledge
        base's draft with a one-line caveat when it fits the message, else an offer to hand over to a person."""
        said = answers.NOTICES[turn.language]
        if turn.handoff:
            return said.handoff, "handoff", []
        draft = self._draft(turn)
        # The draft fits when the router, at the tau its training chose, would have kept the message on the KB,
        # whatever tau the operator runs now (everything to the LLM is tau 0, not "the KB is wrong"). "Which kettle
        # would you recommend?" (p_llm 0.36) got the plug-voltage answer under a p_llm < 0.5 rule.
        fitted = (turn.router or self.router()).fitted_thresholds().get("route_threshold", 0.5)
        fits = bool(turn.hits) and turn.scores.get("p_llm", 1.0) < min(0.5, fitted)
        if fits:
            return f"{said.unconfirmed}\n\n{draft.text}", "draft_with_caveat", draft.sources
        return said.no_answer, "human_offer", []

    def _draft(self, turn: Turn) -> answers.Draft:
        return turn.draft or answers.draft_answer(turn.text, turn.hits)

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
        return turn.finish("llm", result.text.strip() or answers.NOTICES[turn.language].no_answer,
                           "tier: llm rewrite of the draft" if rewrite else "tier: llm answer")

    def fall_back(self, turn: Turn, reason: str) -> Turn:
        turn.fallback, turn.error = True, reason
        draft = self._draft(turn)
        turn.sources = draft.sources
        turn.note("tier", "fallback to small", reason=reason)
        return turn.finish("small", f"{answers.NOTICES[turn.language].fallback}\n\n{draft.text}", f"fallback: {reason}")

    # --- after the answer ---------------------------------------------------------------------------
    def _remember(self, items: Iterator[str | Decided | Revised | Turn]) -> Iterator[str | Decided | Revised | Turn]:
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
                # an answer the check had to change is not repeated to the next customer: it is generated anew
                and not turn.findings and turn.query == turn.text and bool(turn.answer)
                and not (turn.route == "llm" and self._leans_on_the_conversation(turn)))

    @staticmethod
    def _leans_on_the_conversation(turn: Turn) -> bool:
        """Whether the answer makes a claim that only the customer's own words vouch for: the answer check accepts a
        claim found in the message or the history (a customer may name their own link or amount), but an OpenAI
        client writes the history itself, so a forged assistant turn would otherwise reach every later customer
        through the shared cache. Cached answers stand on the help center alone."""
        help_center = AnswerCheck(sources_of(turn.hits, turn.draft.text if turn.draft else "", "", []), "")
        return bool(help_center.unsupported(turn.answer))


def _broken(text: str, message: str, findings: list, context: list[str]) -> list[Defect]:
    """Why a checked LLM answer is not fit to show: a cut-off or repeating generation (the check can trim it, but
    what is left is not an answer), or a customer-visible defect of the text that is left, an answer not grounded
    in the help-center text it was given among them."""
    trimmed = [Defect("cut_off" if f.kind == "truncated" else f.kind, f.value) for f in findings
               if f.kind in ("truncated", "repeated")]
    return trimmed + [d for d in defects(text, message=message, context=context) if d.kind in BROKEN_KINDS]


def _cleaned(shown: str, whole: str, findings: list) -> str:
    """The answer to keep: the streamed text, or the whole checked answer when trimming or de-duplicating applied
    (those fixes can only be made on the whole)."""
    return whole if any(f.kind in ("truncated", "repeated") for f in findings) else shown.strip()
