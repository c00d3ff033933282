"""The chain with the real CPU LLM server (transformers serve of SmolLM2): LLM answers, rewrites, stop."""

from __future__ import annotations

import pytest
from sqlmodel import select

from chains.schema import ChatRequest, ChatResponse
from storage import settings_store
from storage.db import session_scope
from storage.tables import RequestLog

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llm_service(db, llm_server_process):
    from chains.llm.client import reset_llm_client
    from chains.service import TandemService
    from tandem.bootstrap import bootstrap

    list(bootstrap(seed=True))
    reset_llm_client()
    return TandemService()


def test_out_of_scope_message_streams_from_the_llm_and_logs_tokens(llm_service, llm_server):
    settings_store.save({"route_threshold": 0.0}, "test", "everything to the LLM")
    settings_store.invalidate_live_settings()
    try:
        items = list(llm_service.stream(ChatRequest(message="Can you write me a short poem about parcels?",
                                                    user_id="dave", session_id="llm-1")))
    finally:
        settings_store.save({"route_threshold": 0.5}, "test", "default")
        settings_store.invalidate_live_settings()
    final = items[-1]
    assert isinstance(final, ChatResponse) and final.route == "llm", final.reasons
    assert any(isinstance(i, str) and i for i in items[:-1])
    with session_scope() as session:
        row = session.get(RequestLog, final.request_id)
    assert row.completion_tokens > 0 and row.model and row.latency_ms["generate"] > 0


def test_stopped_stream_is_still_logged(llm_service, llm_server):
    settings_store.save({"route_threshold": 0.0}, "test", "everything to the LLM")
    settings_store.invalidate_live_settings()
    try:
        stream = llm_service.stream(ChatRequest(message="Tell me a long story about a lost package",
                                                user_id="dave", session_id="llm-stop"))
        first = next(stream)
        stream.close()  # the stop button
    finally:
        settings_store.save({"route_threshold": 0.5}, "test", "default")
        settings_store.invalidate_live_settings()
    assert isinstance(first, str)
    with session_scope() as session:
        rows = session.exec(select(RequestLog).where(RequestLog.session_id == "llm-stop")).all()
    assert len(rows) == 1 and any("stopped by the customer" in r for r in rows[0].reasons)


def test_llm_down_means_fallback_not_failure(llm_service, llm_server):
    from chains.llm.client import get_llm_client, reset_llm_client

    reset_llm_client()  # a fresh load history: earlier slow calls must not degrade this one first
    llm_service.chain.llm = get_llm_client()
    settings_store.save({"route_threshold": 0.0}, "test", "everything to the LLM")
    settings_store.invalidate_live_settings()
    llm_server.kill()
    try:
        response = llm_service.answer(ChatRequest(message="Do you sell garden furniture?", user_id="dave"))
    finally:
        settings_store.save({"route_threshold": 0.5}, "test", "default")
        settings_store.invalidate_live_settings()
    assert response.route == "small" and response.fallback
    assert "busy" in response.answer and any(r.startswith("fallback") for r in response.reasons)
