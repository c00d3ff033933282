"""Waiting costs no time (issue 57), and the operator still gets the LLM's answer: when the chain's own records
settled a turn with the offer of a person before any LLM call, the LLM tier answers it in the background, as it
would have (generation, the answer check, the replacement), on a copy of the turn (the shadow). Its text, the answer
or the text that failed, becomes an unsent suggestion in the handoff packet (``background``, with ``served``, what it
ended as, and the findings), and what it ended as is recorded on the turn's row (chains/forecast.py counts it on a
predicted turn's row).

Two records settle a turn that way, and both go through the same tier:

- a predicted failure (chains/forecast.py), settled at the load gate: the turn was decided up to the tier (plan llm,
  the KB hits, the draft, the message's vector and score), so the shadow is a copy of it;
- a remembered replacement (chains/router_chain.py ``REPLACED_ORIGIN``), served from the response cache before any
  retrieval: the shadow is the message routed again past the cache (``route_only``: guard, rules, retrieval, score,
  threshold), so the tier reads what it reads in any customer's turn.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from chains.conversation import Conversations
from chains.forecast import predicted_reason
from chains.router_chain import REPLACED_ORIGIN, RouterChain
from chains.tiers.base import LLM_ROUTE
from chains.turn import Turn

RECORD_TRIES, RECORD_WAIT_S = 10, 0.5  # the turn's row is committed as its answer returns, well before this


def settled_before_the_llm(turn: Turn) -> bool:
    """Whether the chain's records gave this turn the offer of a person without asking the LLM: a remembered
    replacement from the cache, or a predicted failure."""
    return (turn.cache_hit and turn.cache_origin == REPLACED_ORIGIN) or bool(predicted_reason(turn.scores))


def shadow_of(chain: RouterChain, turn: Turn) -> Turn | None:
    """A fresh copy of the turn for the LLM tier to answer, planned for the LLM; None when the message no longer
    passes the guard (a policy changed since)."""
    decided = turn
    if turn.cache_hit or turn.plan != LLM_ROUTE:  # settled before retrieval: decided again, past the cache
        decided = chain.route_only.invoke(Turn(request=turn.request, thresholds=turn.thresholds,
                                               request_id=turn.request_id, history=list(turn.history),
                                               past_cache=True))
        if decided.done:
            return None
    return dataclasses.replace(decided, plan=LLM_ROUTE, route="", answer="", served="", done=False, findings=[],
                               reasons=[], trace=[], latency_ms={}, scores=dict(decided.scores), rejected_text="",
                               handoff=False, sources=[], fallback=False, cancelled=False, cache_hit=False,
                               cache_origin="", cache_entry=None, cancel=threading.Event())


def answer_in_background(chain: RouterChain, conversations: Conversations, turn: Turn,
                         failed: Callable[[str], Any]) -> threading.Thread | None:
    """Start the LLM tier's answer to ``turn`` in a thread (None without an LLM tier). ``failed`` hears why a
    suggestion could not be written: a suggestion is a help, not a duty, and the handoff stands without one."""
    tier = chain.tiers.get(LLM_ROUTE)
    if tier is None or chain.llm is None:
        return None
    session_id, request_id, forecast = turn.request.session_id, turn.request_id, chain.forecast

    def write() -> None:
        try:
            started = time.perf_counter()
            shadow = shadow_of(chain, turn)
            if shadow is None:
                return
            for _ in tier.answer(shadow):
                pass
            text = shadow.answer if shadow.served == "llm" else shadow.rejected_text
            if shadow.fallback or shadow.cancelled or not text.strip():
                return
            conversations.suggest(session_id, "background", {
                "text": text.strip(), "model": shadow.model, "language": shadow.language,
                "seconds": round(time.perf_counter() - started, 2), "served": shadow.served,
                "findings": [{"kind": f.get("kind", ""), "detail": str(f.get("value", ""))[:160]}
                             for f in shadow.findings]})
            for _ in range(RECORD_TRIES):
                if forecast is None or forecast.record(request_id, shadow.served):
                    break
                time.sleep(RECORD_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - the customer already has their answer; operators see why
            failed(f"background answer: {exc}")

    thread = threading.Thread(target=write, name=f"answer-{session_id[:8]}", daemon=True)
    thread.start()
    return thread
