"""Parts of the idle-time worker (ops/prepared.py) that need no engine: when it reads the engine as idle, and that the
LLM client sends the priority a caller asks for (to a FAKE OpenAI endpoint, named so: the request body a real vLLM
got cannot be read back; tests/integration/test_prepared.py sends it to the real one, which accepts it)."""

from __future__ import annotations

from chains.llm.base import LLMResult
from chains.llm.client import LLMClient
from ops.prepared import PRIORITY, engine_busy
from tests.fakes import ScriptedOpenAIServer


def test_the_engine_is_idle_only_with_nothing_in_flight_queued_running_or_waiting():
    assert engine_busy({"in_flight": 0, "queued": 0, "vllm": None}) == ""
    assert "in flight" in engine_busy({"in_flight": 1, "queued": 0})
    assert "queued" in engine_busy({"in_flight": 0, "queued": 1})
    assert engine_busy({"in_flight": 1, "queued": 0}, own=1) == ""  # the worker's own call
    fresh = {"available": True, "age_s": 1.0}
    assert "vLLM" in engine_busy({"in_flight": 0, "queued": 0, "vllm": {**fresh, "running": 1, "waiting": 0}})
    assert "vLLM" in engine_busy({"in_flight": 1, "queued": 0, "vllm": {**fresh, "running": 1, "waiting": 2}}, own=1)
    assert engine_busy({"in_flight": 1, "queued": 0, "vllm": {**fresh, "running": 1, "waiting": 0}}, own=1) == ""
    stale = {"available": True, "age_s": 60.0, "running": 3, "waiting": 3}
    assert engine_busy({"in_flight": 0, "queued": 0, "vllm": stale}) == ""  # old readings say nothing about now


def test_the_client_sends_the_asked_priority_and_none_by_default(settings):
    with ScriptedOpenAIServer() as server:
        server.say("hello").say("hello")
        client = LLMClient(settings.model_copy(update={"llm_url": server.url, "llm_model": "scripted",
                                                       "llm_retries": 0}), poll_metrics=False)
        try:
            messages = [{"role": "user", "content": "hi"}]
            background = [i for i in client.stream(messages, priority=PRIORITY) if isinstance(i, LLMResult)]
            live = [i for i in client.stream(messages) if isinstance(i, LLMResult)]
        finally:
            client.close()
    assert background and live
    assert server.requests[0].get("priority") == PRIORITY and "priority" not in server.requests[1]


def test_an_answer_prepared_again_under_the_same_key_renews_its_record_and_keeps_its_hits(tmp_path):
    from storage import prepared_store
    from tests.conftest import fresh_db

    db = fresh_db(tmp_path, "renew")
    first = prepared_store.record(db, question="Q?", answer="old", namespace="ns", entry_key="q", tokens=300)
    with db.session() as session:
        session.execute(prepared_store.hit_statement("ns", "q"))
        session.commit()
    again = prepared_store.record(db, question="Q?", answer="new", namespace="ns", entry_key="q", tokens=200)
    rows = prepared_store.listing(db)
    assert again.id == first.id and len(rows) == 1
    assert (rows[0].answer, rows[0].tokens, rows[0].hits) == ("new", 500, 1)
    assert prepared_store.vouched(db, "ns", "q") and not prepared_store.vouched(db, "ns", "other")
    prepared_store.mark_deleted(db, int(first.id or 0))
    assert not prepared_store.vouched(db, "ns", "q") and prepared_store.tombstoned(db, "") == {"q"}
