"""Conversation prefix reuse against the real vLLM server (CPU build): a conversation's second turn, through the
service with its real database, gets its earlier prompt from vLLM's prefix cache (vLLM's own counters), whether the
history is the session's stored one (chat UI, /api/v1) or the one an OpenAI client sends (/v1)."""

from __future__ import annotations

import re

import httpx
import pytest
from sqlmodel import select

from chains import answers
from chains.llm.load import metrics_url_for
from chains.llm.metrics_parser import parse_vllm_metrics
from chains.schema import ChatRequest
from core.policy import Thresholds
from storage.tables import ChatMessage
from tests.conftest import make_runtime

pytestmark = pytest.mark.slow


def counters(url: str) -> tuple[float, float]:
    metrics = parse_vllm_metrics(httpx.get(metrics_url_for(url), timeout=10).text)
    assert metrics.prefix_cache_queries is not None and metrics.prefix_cache_hits is not None
    return metrics.prefix_cache_hits, metrics.prefix_cache_queries


def block_size(url: str) -> int:
    """The KV cache's block size (vLLM caches whole blocks only), from its vllm:cache_config_info series."""
    text = httpx.get(metrics_url_for(url), timeout=10).text
    return int(re.search(r'^vllm:cache_config_info\{[^}]*block_size="(\d+)"', text, re.M).group(1))


def system_prompt_tokens(url: str, model: str) -> int:
    """The system prompt's tokens as the server's chat template lays them out (vLLM's /tokenize)."""
    body = {"model": model, "messages": [{"role": "system", "content": answers.SYSTEM_PROMPT}]}
    return int(httpx.post(url.removesuffix("/v1") + "/tokenize", json=body, timeout=10).json()["count"])


@pytest.mark.parametrize("history_from", ["session", "client"])
def test_a_second_turn_gets_the_whole_first_prompt_not_just_the_system_prompt_from_vllms_prefix_cache(
        llm_settings, db, demo_kb, history_from):
    runtime = make_runtime(llm_settings, db, demo_kb, use_llm=True)
    session_id = f"prefix-{history_from}"
    question = f"How do I return a kettle that arrived broken? ({history_from})"  # each run a prompt of its own
    try:
        runtime.policy.save({"route_threshold": 0.0}, "test", "everything to the LLM")
        ask = lambda text, history=None: runtime.service.answer(ChatRequest(  # noqa: E731
            message=text, user_id="pat", customer="pat", session_id=session_id, channel="api", temperature=0.0,
            history=history))
        first = ask(question)
        # An OpenAI client sends the conversation as it saw it: its message and the answer it got, nothing else.
        history = ([{"role": "user", "content": question}, {"role": "assistant", "content": first.answer}]
                   if history_from == "client" else None)
        before = counters(llm_settings.llm_url)
        second = ask("And how long until I get my money back?", history)
        after = counters(llm_settings.llm_url)
        with runtime.db.session() as session:
            stored = session.exec(select(ChatMessage).where(ChatMessage.session_id == session_id)
                                  .order_by(ChatMessage.id)).all()  # type: ignore[arg-type]
    finally:
        runtime.policy.save({"route_threshold": Thresholds.defaults(llm_settings).route_threshold}, "test", "back to defaults")
        runtime.close()
    assert first.model and second.model, (first.reasons, second.reasons)  # both turns were sent to the LLM
    assert stored[0].sent and stored[0].sent.startswith("Help-center context:\n")
    assert f"<<<\n{question}\n>>>" in stored[0].sent
    hits, queries = after[0] - before[0], after[1] - before[1]
    assert queries >= second.prompt_tokens > 0
    assert hits > system_prompt_tokens(llm_settings.llm_url, second.model), (hits, queries)
    block = block_size(llm_settings.llm_url)  # the first prompt's whole blocks, all of them
    assert hits >= first.prompt_tokens // block * block, (hits, first.prompt_tokens, block)
