"""The router chain end to end on real parts: MiniLM, Chroma (demo KB), SQLite, and no LLM unless stated."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from chains.schema import ChatRequest
from storage import settings_store
from storage.db import session_scope
from storage.tables import RequestLog
from tests.conftest import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(db):
    from chains.service import TandemService
    from tandem.bootstrap import bootstrap

    list(bootstrap(seed=True))  # demo orders and the demo KB in the test's TANDEM_HOME
    return TandemService(use_llm=False)


def ask(service, text, user="alice", session=""):
    return service.answer(ChatRequest(message=text, user_id=user, session_id=session, channel="api"))


def row(request_id) -> RequestLog:
    with session_scope() as session:
        return session.get(RequestLog, request_id)


def test_stages_run_in_order_and_every_message_logs_one_complete_row(service):
    response = ask(service, "How long does standard shipping take?")
    stages = [step["stage"] for step in response.trace]
    assert stages[:5] == ["guard", "cache", "rules", "score", "threshold"]
    assert response.route == "small" and response.sources
    logged = row(response.request_id)
    assert logged.route == "small" and logged.kb_version == service.kb.version
    assert {"guard", "embed", "cache", "rules", "retrieve", "score", "total"} <= set(logged.latency_ms)
    assert "p_llm" in logged.scores and logged.reasons and logged.settings_version >= 1
    with session_scope() as session:
        assert len(session.exec(select(RequestLog).where(RequestLog.id == response.request_id)).all()) == 1


def test_guard_refuses_and_logs(service):
    for text in ["", "   ", "x" * 50_000, "\x00\x01\x02"]:
        response = ask(service, text)
        assert response.route == "guard" and response.answer
        assert row(response.request_id).route == "guard"


def test_cache_hits_paraphrase_but_never_a_negation(service):
    first = ask(service, "How can I reset my password?")
    again = ask(service, "How can I reset my password?")
    assert first.route == "small" and again.route == "cache"
    ask(service, "cancel my order")
    negated = ask(service, "I do not want to cancel my order")
    assert negated.route != "cache"
    assert any(step["stage"] == "cache" and step["decision"] == "miss" for step in negated.trace)


def test_cache_never_stores_or_serves_personal_data(service):
    text = "my email is bob@example.com, how do I change my email address?"
    first = ask(service, text, user="bob")
    second = ask(service, text, user="carol")
    assert first.route != "cache" and second.route != "cache"
    assert "bob@example.com" not in row(second.request_id).text  # masked in the log


def test_order_tool_answers_only_the_owner(service):
    own = ask(service, "where is my order NW-104233?", user="alice")
    other = ask(service, "where is my order NW-104233?", user="bob")
    assert own.route == "tool" and "NW-104233" in own.answer and "can't find" not in own.answer
    assert other.route == "tool" and "can't find" in other.answer
    from storage.seed import DEMO_ORDERS

    alice_items = next(line for line in DEMO_ORDERS.read_text().splitlines() if line.startswith("NW-104233"))
    assert alice_items.split(",")[4].strip('"') not in other.answer
    assert "[order]" in row(own.request_id).text  # order numbers are masked in the log


def test_live_threshold_change_reroutes_the_same_query_without_restart(service):
    query = "Do you ship to Canada, and what would customs cost for a sofa?"
    settings_store.save({"route_threshold": 0.99}, "test", "keep it small")
    settings_store.invalidate_live_settings()
    before = ask(service, query, session="tau-a")
    settings_store.save({"route_threshold": 0.0}, "test", "send everything to the LLM")
    settings_store.invalidate_live_settings()
    after = ask(service, query, session="tau-b")
    settings_store.save({"route_threshold": 0.5}, "test", "back to default")
    settings_store.invalidate_live_settings()
    threshold_before = next(s for s in before.trace if s["stage"] == "threshold")
    threshold_after = next(s for s in after.trace if s["stage"] == "threshold")
    assert threshold_before["decision"].startswith(("small", "rewrite"))
    assert threshold_after["decision"].startswith("llm")
    assert row(after.request_id).settings_version > row(before.request_id).settings_version


def test_follow_up_uses_the_earlier_turn(service):
    first = ask(service, "How do I return an item?", session="memory-1")
    follow = ask(service, "and how long does that take?", session="memory-1")
    cold = ask(service, "and how long does that take?", session="memory-2")
    assert first.route == "small"
    cache_step = next(s for s in follow.trace if s["stage"] == "cache")
    assert cache_step["decision"] == "skipped"
    assert follow.sources and follow.sources[0].answer_id != (cold.sources[0].answer_id if cold.sources else "")
    assert follow.sources[0].answer_id in {"return_policy", "start_return", "refund_timing", "return_shipping_label"}


def test_ask_json_shape():
    result = run_cli("ask", "How long does standard shipping take?", "--json", "--user", "alice")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"request_id", "route", "answer", "sources", "scores", "reasons", "latency_ms", "degraded"} <= set(payload)
    assert payload["route"] in {"cache", "tool", "small", "llm"}


def test_route_batch_output_format(tmp_path):
    from storage.seed import DEMO_ORDERS

    demo = DEMO_ORDERS.parent
    queries = tmp_path / "queries.csv"
    queries.write_text("query_id,query\nq1,how long does shipping take\nq2,where is order NW-104233\n"
                       "q3,Explain the geopolitical history of the Ottoman empire in detail\n")
    out = tmp_path / "out.jsonl"
    result = run_cli("route-batch", "--kb", str(demo / "answers.csv"), "--questions", str(demo / "questions.csv"),
                     "--queries", str(queries), "--out", str(out))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["query_id"] for r in records] == ["q1", "q2", "q3"]
    for record in records:
        assert {"query_id", "route", "answer_id", "p_llm", "reasons"} <= set(record)
    assert records[0]["route"] == "small" and records[0]["answer_id"] == "shipping_times"
    assert records[1]["route"] == "tool"
    assert records[2]["route"] == "llm" and 0.0 <= records[2]["p_llm"] <= 1.0


def test_router_registry_and_promotion_goes_live_without_restart(service, tandem_home):
    from chains.routers.base import ROUTER_CLS, RouteContext, SHIPPED_ARTIFACT, get_router
    from chains.routers.training import promote

    for name in ("similarity", "learned", "combined"):
        assert 0.0 <= get_router(name).score("how do I return an item", RouteContext()) <= 1.0
    assert set(ROUTER_CLS) >= {"similarity", "learned", "combined"}
    with pytest.raises(KeyError):
        get_router("no-such-router")

    artifact = json.loads(SHIPPED_ARTIFACT.read_text())
    artifact["combined"]["intercept"] = 50.0  # a candidate that sends everything to the LLM
    candidate = tandem_home / "router" / "candidate.json"
    candidate.parent.mkdir(parents=True, exist_ok=True)
    candidate.write_text(json.dumps(artifact))
    live = promote(candidate)
    try:
        service._router_checked = 0.0  # skip the 5 s poll interval
        response = ask(service, "How long does standard shipping take to arrive?", session="promo")
        assert response.scores["p_llm"] > 0.99
    finally:
        live.unlink()
        service._router_checked = 0.0
    assert ask(service, "how many days is standard delivery", session="promo2").scores["p_llm"] < 0.5
