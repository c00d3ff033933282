"""The LLM tier: a model's answer, checked (chains/check.py), or a rewrite of the KB draft, verified against it
(chains/verify.py). An answer that fails is replaced whole (the draft with a caveat, or an offer of a person);
a rewrite that fails leaves the draft standing. The endpoint and model follow the score band (chains/llm/endpoints.py).

Advice on products (``Turn.advice``, catalog/advice.py) is written from the candidates' records instead of help-center
text. Their cards come first, before any LLM text; what the model says about products passes the catalog's claims
check (a ``product_claim`` defect otherwise), and an answer that fails leaves the cards with one honest line.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from chains import answers
from chains.answer_fit import copied_answer, off_topic
from chains.check import CLAIM_KINDS, STAND_INS, AnswerCheck, StreamChecker, sources_of, written_stand_ins
from chains.llm.base import LLMResult, LLMUnavailable
from chains.schema import Revised
from chains.settled import SettledWatch
from chains.tiers.base import LLM_ROUTE, SMALL_ROUTE, Tier, register
from chains.turn import Turn, timed
from chains.verify import Defect, RewriteVerdict, defects, rewrite_verdict, unanswered_slot, without_citations

# Defects that make an LLM answer unfit to show (claims and language have policies of their own in the check).
BROKEN_KINDS = ("echo", "narration", "refusal", "cut_off", "empty", "ungrounded", "off_topic", "unanswered", "copied",
                "product_claim")
# A rewrite rejected for one of these does not answer the question; when its draft does not either, both are replaced.
MISSES_THE_QUESTION = ("off_topic", "unanswered")
SETTLED_NOTE = ", found while it was written: generation stopped"
CONNECTION_DROPPED = "\n\n(The connection to our assistant dropped.)\n\n"


@register
class LLMTier(Tier):
    name = LLM_ROUTE
    cacheable = True  # only answers the help center vouches for (RouterChain._cacheable)
    plans = ("llm", "rewrite")

    def llm_request(self, turn: Turn) -> list[dict[str, str]]:
        draft = turn.draft.body if turn.plan == "rewrite" and turn.draft else None
        products = turn.advice.context() if turn.advice is not None and turn.plan == "llm" else ""
        return answers.llm_messages(turn.text, turn.hits, turn.history, draft, brand=self.parts.brand,
                                    products=products)

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        """Generate, then check. An answer streams out through the answer check (chains/check.py); a rewrite is
        verified against its draft (chains/verify.py) while the customer already reads the draft."""
        if turn.plan == "rewrite":
            yield from self._rewritten(turn)
        elif turn.advice is not None:
            yield from _cards_first(turn, self._checked(turn, self._generate(turn)))
        else:
            yield from self._checked(turn, self._generate(turn))

    def _generate(self, turn: Turn) -> Iterator[str | LLMResult]:
        assert self.parts.llm is not None  # the load gate sends no turn here without an LLM
        request = turn.request
        with timed(turn, "generate"):
            yield from self.parts.llm.stream(self.llm_request(turn), score=turn.scores.get("p_llm"), cancel=turn.cancel,
                                       max_tokens=request.max_tokens, temperature=request.temperature,
                                       user_id=request.customer, priority=request.priority)

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
                                      sources=[draft.body, turn.text], shop=self.parts.brand.shop)
            if verdict.accepted and (wrong := self._off_topic(turn, rewrite)):
                verdict = RewriteVerdict(False, f"{wrong.kind}: {wrong.detail}"[:160])
        if not verdict.accepted and verdict.reason.split(":")[0] in MISSES_THE_QUESTION \
                and self._misses_question(turn, draft.body):
            # The rewrite does not answer the question, and neither does its draft ("do you have a blue throw blanket
            # under $50?" rewritten from the student-discount answer): both are replaced, as a failed LLM answer is.
            turn.answer, turn.served, turn.sources, turn.rejected_text = self._notices(turn).no_answer, "human_offer", \
                [], rewrite
            turn.findings.append({"kind": "rewrite_rejected", "value": verdict.reason.split(":")[0], "action": "draft",
                                  "detail": verdict.reason})
            turn.findings.append({"kind": "off_topic", "value": "the draft does not answer the question either",
                                  "action": "draft", "detail": "customer-visible defect"})
            turn.reasons.append(f"rewrite rejected ({verdict.reason}) and its draft does not answer the question: "
                                "a person is offered")
            turn.note("verify", "rewrite and draft rejected", reason=verdict.reason)
            yield Revised(text=turn.answer)
            yield turn
            return
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
        return turn.finish(SMALL_ROUTE, draft.text, f"fallback: {reason}")

    def _checked(self, turn: Turn, generated: Iterator[str | LLMResult]) -> Iterator[str | Revised | Turn]:
        """Pass the answer on through the check; apply the operator's policy to what it finds. An answer the check
        escalated, or one with a customer-visible defect (chains/verify.py), is replaced whole: never what is left
        of the broken text."""
        check = AnswerCheck(sources_of(turn.hits, turn.draft.text if turn.draft else "", turn.text, turn.history)
                            + _records(turn), turn.text, turn.thresholds.check_actions,
                            answers.system_prompt(self.parts.brand))
        stream = StreamChecker(check)
        result: LLMResult | None = None
        # Every stand-in the check may write counts as grounded here, and without help-center text nothing is
        # judged ungrounded, as at the end: so a sentence found ungrounded now is ungrounded in the whole answer.
        watch = SettledWatch(turn.text, [h.answer for h in turn.hits] + _records(turn)
                             + sorted(set(STAND_INS.values())) if turn.hits and turn.advice is None else [])
        settled: Defect | None = None  # a defect in finished sentences that no later text can take away
        hold, check_ms = self.parts.hold_until_checked, 0.0
        try:
            for item in generated:
                if isinstance(item, LLMResult):
                    result = item
                    continue
                started = time.perf_counter()
                shown = stream.feed(item)
                if self.parts.stop_when_broken and not stream.stopped:
                    settled = watch.feed(stream.shown_text)
                check_ms += (time.perf_counter() - started) * 1000
                if shown and not hold:
                    yield shown
                if stream.stopped or settled:  # it will be replaced: stop generating what will not be shown
                    turn.cancel.set()
        except LLMUnavailable as exc:
            if stream.shown_text and not hold:  # the customer saw a partial answer: say so
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
        cancelled_by_check = (stream.stopped or settled is not None) and result.cancelled
        verdict = check.finish(stream.raw_text if cancelled_by_check else result.text,
                               "stop" if cancelled_by_check else result.finish_reason)
        findings = stream.findings + [f for f in verdict.findings if f.kind not in CLAIM_KINDS]
        self.finish_llm(turn, result.model_copy(update={"cancelled": result.cancelled and not cancelled_by_check}))
        kept = "" if turn.cancelled else _cleaned(stream.shown_text, verdict.text, findings)
        broken = self._unfit(turn, kept, findings, settled, stream.stopped)
        check_ms += (time.perf_counter() - started) * 1000
        turn.latency_ms["check"] = round(check_ms, 3)
        if rest and not broken and not hold:
            yield rest
        turn.findings = [f.as_dict() for f in findings] + [
            {"kind": d.kind, "value": d.detail[:120], "action": "draft",
             "detail": "customer-visible defect" + (SETTLED_NOTE if d is settled else "")}
            for d in broken if d.kind not in {f.kind for f in findings}]
        escalate = stream.stopped or verdict.replace_with_draft or verdict.handoff or bool(broken)
        if escalate:
            turn.handoff = verdict.handoff or any(f.action == "handoff" for f in findings)
            turn.rejected_text = result.text.strip()
            turn.answer, turn.served, turn.sources = self._instead(turn)
            yield Revised(text=turn.answer)
        elif turn.cancelled:  # what the customer saw before pressing Stop
            turn.answer = "" if hold else stream.shown_text.strip()
        else:
            if findings:
                turn.answer = kept
            if hold:  # checked whole: now it may be shown
                yield turn.answer
        decision = (f"{len(turn.findings)} finding(s): " + ", ".join(f"{f['kind']}->{f['action']}"
                                                                     for f in turn.findings)
                    if turn.findings else "no unsupported claim")
        turn.note("check", decision, findings=turn.findings, escalated=escalate)
        yield turn

    def _unfit(self, turn: Turn, kept: str, findings: list, settled: Defect | None, stopped: bool) -> list[Defect]:
        """Why the checked answer may not be shown: the defect found while it was written, else its customer-visible
        defects, else a help-center answer copied whole, else an answer about something else than the message."""
        if settled is not None and not stopped:
            return [settled]
        if turn.cancelled or stopped:
            return []
        # What the answer was written from (the message grounds nothing), and the stand-in words the check wrote
        context = [h.answer for h in turn.hits] + written_stand_ins((f.kind, f.action) for f in findings)
        if turn.advice is not None:  # the records it was written from; the judgement asked for is the customer's own
            context = _records(turn) + [turn.text] + written_stand_ins((f.kind, f.action) for f in findings)
        products = turn.advice.claims if turn.advice is not None else None
        if broken := _broken(kept, turn.text, findings, context, products):
            return broken
        wrong = self._copied(turn, kept) or self._off_topic(turn, kept)
        return [wrong] if wrong else []

    def _copied(self, turn: Turn, text: str) -> Defect | None:
        """A help-center answer copied whole, where the router found that none fits the message (a caller's choice
        of the LLM is no such judgement)."""
        no_fit = turn.request.mode == "routed" and bool(turn.hits) and not self.draft_fits(turn)
        entry = copied_answer(text, [h.answer for h in turn.hits]) if no_fit else ""
        return Defect("copied", f"a copy of the help-center answer the router found not to fit: {entry}") \
            if entry else None

    def _off_topic(self, turn: Turn, text: str, score: bool = True) -> Defect | None:
        """Whether the answer is about something else than the message, in the message's own vector space (the
        answer embedded once, about 5 ms, only for an LLM answer or rewrite that passed every other check)."""
        if turn.vector is None or self.parts.kb is None or not text.strip():
            return None
        encoder = self.parts.kb.encoder_for(turn.query)
        answer = encoder.encode_answer(without_citations(text))
        similarity = float(np.dot(turn.vector, answer) / (np.linalg.norm(turn.vector) * np.linalg.norm(answer) or 1.0))
        if score:
            turn.scores["answer_relevance"] = round(similarity, 4)
        return off_topic(turn.text, text, similarity, encoder.name)

    def _misses_question(self, turn: Turn, draft: str) -> bool:
        """Whether the KB draft, too, fails to answer the message: off topic or a named slot left unanswered."""
        if unanswered_slot(turn.text, draft):
            return True
        return self._off_topic(turn, draft, score=False) is not None

    def _instead(self, turn: Turn) -> tuple[str, str, list[dict]]:
        """What replaces an LLM answer that failed its checks: a colleague when the policy says so, the knowledge
        base's draft with a one-line caveat when it fits the message, else an offer to hand over to a person."""
        said = self._notices(turn)
        if turn.handoff:
            return said.handoff, "handoff", []
        if turn.advice is not None:  # the cards stay (_cards_first), with one honest line instead of the advice
            return turn.advice.honest_line(), "candidates", _product_sources(turn)
        draft = self._draft(turn)
        if self.draft_fits(turn):
            return f"{said.unconfirmed}\n\n{draft.text}", "draft_with_caveat", draft.sources
        return said.no_answer, "human_offer", []

    def draft_fits(self, turn: Turn) -> bool:
        """Whether the router, at the tau its training chose, would have kept the message on the KB, whatever tau
        the operator runs now (everything to the LLM is tau 0, not "the KB is wrong"). "Which kettle would you
        recommend?" (p_llm 0.36) got the plug-voltage answer under a p_llm < 0.5 rule."""
        fitted = (turn.router or self.parts.router()).fitted_thresholds().get("route_threshold", 0.5)
        return bool(turn.hits) and turn.scores.get("p_llm", 1.0) < min(0.5, fitted)

    def _draft(self, turn: Turn) -> answers.Draft:
        return turn.draft or answers.draft_answer(turn.text, turn.hits, self.parts.brand)

    def _notices(self, turn: Turn) -> answers.Notices:
        return answers.notices_for(self.parts.brand)[turn.language]

    def finish_llm(self, turn: Turn, result: LLMResult) -> Turn:
        turn.model, turn.prompt_tokens, turn.completion_tokens = result.model, result.prompt_tokens, \
            result.completion_tokens
        turn.sources = _product_sources(turn) if turn.advice is not None else turn.draft.sources if turn.draft else []
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
        return turn.finish("llm", result.text.strip() or self._notices(turn).no_answer,
                           "tier: llm rewrite of the draft" if rewrite else "tier: llm answer")

    def fall_back(self, turn: Turn, reason: str) -> Turn:
        turn.fallback, turn.error = True, reason
        if turn.advice is not None:  # no advice, but the cards (_cards_first) and why there is none
            turn.sources, turn.served = _product_sources(turn), "candidates"
            turn.note("tier", "fallback to the candidates' cards", reason=reason)
            # Not the fallback notice: it offers "the closest answer from our help center", and none follows
            return turn.finish(SMALL_ROUTE, turn.advice.honest_line(), f"fallback: {reason}")
        draft = self._draft(turn)
        turn.sources = draft.sources
        turn.note("tier", "fallback to small", reason=reason)
        return turn.finish(SMALL_ROUTE, f"{self._notices(turn).fallback}\n\n{draft.text}", f"fallback: {reason}")


def _broken(text: str, message: str, findings: list, context: list[str], products=None) -> list[Defect]:
    """Why a checked LLM answer is not fit to show: a cut-off or repeating generation (the check can trim it, but
    what is left is not an answer), or a customer-visible defect of the text that is left, an answer not grounded
    in the help-center text it was given among them, or (advice) a product claim no candidate's record backs."""
    trimmed = [Defect("cut_off" if f.kind == "truncated" else f.kind, f.value) for f in findings
               if f.kind in ("truncated", "repeated")]
    return trimmed + [d for d in defects(text, message=message, context=context, products=products)
                      if d.kind in BROKEN_KINDS]


def _records(turn: Turn) -> list[str]:
    """The candidates' records an advice answer was written from ([] for any other answer)."""
    return [turn.advice.context()] if turn.advice is not None else []


def _product_sources(turn: Turn) -> list[dict]:
    """An advice answer's sources: the candidate products' records."""
    return [{"answer_id": p.id, "title": p.title, "score": 0.0, "product_id": p.id} for p in turn.advice.products]


def _cards_first(turn: Turn, events: Iterator[str | Revised | Turn]) -> Iterator[str | Revised | Turn]:
    """The candidates' cards at once, before any LLM text, and kept above whatever replaces that text."""
    cards = turn.advice.card_list()
    yield cards + "\n\n"
    for item in events:
        if isinstance(item, Revised):
            yield Revised(text=f"{cards}\n\n{item.text}")
        elif isinstance(item, Turn):
            item.answer = f"{cards}\n\n{item.answer}".strip()
            item.products, item.filters = turn.advice.cards, turn.advice.chips
            yield item
        else:
            yield item


def _cleaned(shown: str, whole: str, findings: list) -> str:
    """The answer to keep: the streamed text, or the whole checked answer when trimming or de-duplicating applied
    (those fixes can only be made on the whole)."""
    return whole if any(f.kind in ("truncated", "repeated") for f in findings) else shown.strip()
