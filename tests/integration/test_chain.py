"""The router chain end to end on real parts: MiniLM, Chroma (demo KB), SQLite, no LLM (test_chain_llm.py has it)."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from chains.schema import ChatRequest
from core.policy import Thresholds
from storage.tables import Handoff, RequestLog
from tests.conftest import DEMO, demo_order_items, fresh_db, make_runtime, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runtime(settings, db, demo_kb):
    return make_runtime(settings, db, demo_kb)


@pytest.fixture(scope="module")
def service(runtime):
    return runtime.service


def ask(service, text, user="alice", session=""):
    """The service as a front end calls it once the customer's signed token has verified (app/access.py)."""
    return service.answer(ChatRequest(message=text, user_id=user, customer=user, session_id=session, channel="api"))


def row(service, request_id) -> RequestLog:
    with service.db.session() as session:
        return session.get(RequestLog, request_id)


def test_stages_run_in_order_and_every_message_logs_one_complete_row(service):
    response = ask(service, "How long does standard shipping take?")
    stages = [step["stage"] for step in response.trace]
    assert stages[:5] == ["guard", "cache", "rules", "score", "threshold"]
    assert response.route == "small" and response.sources
    logged = row(service, response.request_id)
    assert logged.route == "small" and logged.kb_version == service.chain.kb.version
    assert {"guard", "embed", "cache", "rules", "retrieve", "score", "total"} <= set(logged.latency_ms)
    assert "p_llm" in logged.scores and logged.reasons and logged.settings_version >= 1
    with service.db.session() as session:
        assert len(session.exec(select(RequestLog).where(RequestLog.id == response.request_id)).all()) == 1


def cache_step(response) -> dict:
    return next(step for step in response.trace if step["stage"] == "cache")


def test_guard_refuses_and_logs(service):
    for text in ["", "   ", "x" * 50_000, "\x00\x01\x02"]:
        response = ask(service, text)
        assert response.route == "guard" and response.answer
        assert row(service, response.request_id).route == "guard"


def test_cache_hits_a_repeated_question_and_a_paraphrase_but_never_a_negation(service):
    first = ask(service, "How can I reset my password?")
    again = ask(service, "How can I reset my password?")
    assert first.route == "small" and again.route == "cache"
    assert cache_step(again)["decision"] == "exact hit"
    reworded = ask(service, "how could I reset my password")
    assert reworded.route == "cache" and reworded.sources[0].answer_id == "reset_password"
    assert cache_step(reworded)["decision"] == "semantic hit"
    assert cache_step(reworded)["detail"]["cached_question"] == "How can I reset my password?"
    ask(service, "cancel my order")
    negated = ask(service, "I do not want to cancel my order")
    assert negated.route != "cache"
    assert any(step["stage"] == "cache" and step["decision"] == "miss" for step in negated.trace)


def test_a_misspelt_message_is_searched_mended_and_the_trace_says_so(service):
    turn = ask(service, "hi, how do i canecl my oredr, it was a gift and my aunt already has one")
    mended = [step for step in turn.trace if step["decision"] == "searched as mended"]
    assert mended[0]["detail"]["search_text"] == "hi, how do i cancel my order, it was a gift and my aunt already has one"
    scored = next(step for step in turn.trace if step["stage"] == "score")
    assert scored["detail"]["top_answers"][0] == "cancel_order"


def test_cache_never_stores_or_serves_personal_data(service):
    text = "my email is bob@example.com, how do I change my email address?"
    entries = len(service.chain.cache)
    first = ask(service, text, user="bob")
    second = ask(service, text, user="carol")
    assert first.route != "cache" and second.route != "cache"
    assert len(service.chain.cache) == entries  # nothing was stored ...
    # ... and nothing in the store holds the message or its answer (MemoryState keeps its entries in _entries)
    stored = list(service.chain.cache.state._entries.values())
    assert not any("bob@example.com" in entry.text + entry.key + str(entry.payload) for entry in stored)
    assert "bob@example.com" not in row(service, second.request_id).text  # masked in the log


def test_order_tool_answers_only_the_owner(service):
    own = ask(service, "where is my order NW-104233?", user="alice")
    other = ask(service, "where is my order NW-104233?", user="bob")
    assert own.route == "tool" and "NW-104233" in own.answer and "can't find" not in own.answer
    assert all(item in own.answer for item in demo_order_items("NW-104233"))
    assert other.route == "tool" and "can't find" in other.answer
    assert not any(item in other.answer for item in demo_order_items("NW-104233"))
    assert "[order]" in row(service, own.request_id).text  # order numbers are masked in the log


def test_a_chinese_status_question_gets_the_order_in_chinese_and_its_number_masked(service):
    own = ask(service, "我的订单NW-104233到哪了？", user="alice")
    assert own.route == "tool" and "订单NW-104233" in own.answer and "已发货" in own.answer
    assert all(item in own.answer for item in demo_order_items("NW-104233"))
    other = ask(service, "我的订单NW-104233到哪了？", user="bob")
    assert other.route == "tool" and "找不到订单NW-104233" in other.answer
    assert row(service, own.request_id).text == "我的订单[order]到哪了？"


def test_a_message_naming_an_order_without_a_status_question_gets_the_answer_with_its_number(service):
    reply = ask(service, "please cancel order NW-105390, i no longer need it", user="alice")
    assert reply.route == "small" and reply.answer.startswith("Order NW-105390 can be cancelled")


def test_a_greeting_or_thanks_alone_gets_a_courteous_reply_from_the_courtesy_rule_in_its_language(service):
    from chains.rules import COURTESY_REPLIES

    for text, language, kind in (("thanks so much, you've been really helpful!", "en", "thanks"),
                                 ("hi there, how are you today?", "en", "how_are_you"),
                                 ("谢谢你的帮助！", "zh", "thanks")):
        reply = ask(service, text, session=f"courtesy-{kind}-{language}")
        assert reply.route == "tool" and reply.answer == COURTESY_REPLIES[language][kind], (text, reply.answer)
        logged = row(service, reply.request_id)
        assert logged.route == "tool" and "rule: courtesy -> tool courtesy" in logged.reasons
    asked = ask(service, "thanks! and how long does standard shipping take?")
    assert asked.route == "small" and asked.sources  # courtesy and a question: the question is answered


def test_are_you_a_bot_is_answered_by_the_assistant_identity_rule_without_the_llm(service):
    from chains.rules import ASSISTANT_REPLIES

    for text, language in (("are you a real person or a bot?", "en"), ("你是机器人吗？", "zh")):
        reply = ask(service, text, session=f"identity-{language}")
        assert reply.route == "tool" and reply.answer == ASSISTANT_REPLIES[language], (text, reply.answer)
        logged = row(service, reply.request_id)
        assert "rule: assistant-identity -> tool assistant_identity" in logged.reasons and not logged.model


def test_live_threshold_change_changes_the_decision_without_restart(runtime, service, settings):
    """The decision flips; the route itself (small -> llm) is tested with the live LLM in test_chain_llm.py."""
    query = "Do you ship to Canada, and what would customs cost for a sofa?"
    runtime.policy.save({"route_threshold": 0.99}, "test", "keep it small")
    before = ask(service, query, session="tau-a")
    runtime.policy.save({"route_threshold": 0.0}, "test", "send everything to the LLM")
    after = ask(service, query, session="tau-b")
    runtime.policy.save({"route_threshold": Thresholds.defaults(settings).route_threshold}, "test", "back to default")
    threshold_before = next(s for s in before.trace if s["stage"] == "threshold")
    threshold_after = next(s for s in after.trace if s["stage"] == "threshold")
    assert threshold_before["decision"].startswith(("small", "rewrite"))
    assert threshold_after["decision"].startswith("llm")
    assert row(service, after.request_id).settings_version > row(service, before.request_id).settings_version


def test_follow_up_uses_the_earlier_turn(service):
    first = ask(service, "How do I return an item?", session="memory-1")
    follow = ask(service, "and how long does that take?", session="memory-1")
    cold = ask(service, "and how long does that take?", session="memory-2")
    assert first.route == "small"
    cache_step = next(s for s in follow.trace if s["stage"] == "cache")
    assert cache_step["decision"] == "skipped"
    assert follow.sources and follow.sources[0].answer_id != (cold.sources[0].answer_id if cold.sources else "")
    assert follow.sources[0].answer_id in {"return_policy", "start_return", "refund_timing", "return_shipping_label"}


def test_requests_finishing_together_share_one_commit_and_every_row_and_message_is_written(settings, demo_kb,
                                                                                          tmp_path):
    """Group commit: rows that wait while another request writes go into its next transaction; none is lost and
    a session's messages keep their order."""
    import threading
    import time

    from sqlalchemy import event
    from sqlmodel import col, func

    from storage.tables import ChatMessage, ChatSession

    database = fresh_db(tmp_path)
    service = make_runtime(settings, database, demo_kb).service
    ask(service, "How do I return an item?", session="opened")  # a session that exists before the burst
    commits: list[int] = []
    event.listen(database.engine, "commit", lambda connection: commits.append(1))
    texts = ["How do I return an item?", "How long does standard shipping take?", "Do you ship abroad?",
             "How do I reset my password?", "Can I pay with PayPal?", "Where is my parcel?"]
    answers: list = []
    threads = [threading.Thread(target=lambda t=text, i=i: answers.append(
        ask(service, t, session="opened" if i == 0 else ""))) for i, text in enumerate(texts)]
    with service.log_writer.lock:  # a writer is busy: every request finishes its chain and waits for the commit
        for thread in threads:
            thread.start()
        for _ in range(600):
            if service.status()["log_backlog"] == len(texts):
                break
            time.sleep(0.05)
        assert service.status()["log_backlog"] == len(texts)
        assert not answers  # nobody has its answer before its row is committed
    for thread in threads:
        thread.join(60)
    assert len(answers) == len(texts) and sum(commits) == 1, (len(answers), commits)
    assert service.status()["log_backlog"] == 0
    with database.session() as session:
        logged = set(session.exec(select(RequestLog.id)).all())
        assert {a.request_id for a in answers} <= logged and len(logged) == len(texts) + 1
        assert session.exec(select(func.count()).select_from(ChatSession)).one() == len(texts)
        opened = session.exec(select(ChatMessage).where(ChatMessage.session_id == "opened")
                              .order_by(col(ChatMessage.id))).all()
    assert [m.role for m in opened] == ["user", "assistant"] * 2
    # A minted session's first turn was stored: the follow-up in it reads that history (and so skips the cache).
    follow = ask(service, "and how long does that take?", session=answers[-1].session_id)
    assert next(s for s in follow.trace if s["stage"] == "cache")["decision"] == "skipped"


def test_ask_json_shape():
    result = run_cli("ask", "How long does standard shipping take?", "--json", "--user", "alice")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"request_id", "route", "answer", "sources", "scores", "reasons", "latency_ms", "degraded"} <= set(payload)
    assert payload["route"] in {"cache", "tool", "small", "llm"}


def test_route_batch_output_format(tmp_path):
    demo = DEMO
    queries = tmp_path / "queries.csv"
    queries.write_text("query_id,query\nq1,how long does shipping take\nq2,where is order NW-104233\n"
                       "q3,Explain the geopolitical history of the Ottoman empire in detail\n")
    out = tmp_path / "out.jsonl"
    result = run_cli("route-batch", "--kb", str(demo / "answers.csv"), "--questions", str(demo / "questions.csv"),
                     "--queries", str(queries), "--out", str(out), "--no-tune")  # tuning: test_kb_tune.py
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["query_id"] for r in records] == ["q1", "q2", "q3"]
    for record in records:
        assert {"query_id", "route", "answer_id", "p_llm", "reasons"} <= set(record)
    assert records[0]["route"] == "small" and records[0]["answer_id"] == "shipping_times"
    assert records[1]["route"] == "tool"
    assert records[2]["route"] == "llm" and 0.0 <= records[2]["p_llm"] <= 1.0


def test_router_registry_and_promotion_goes_live_without_restart(settings, db, demo_kb, tmp_path):
    from chains.routers import ROUTER_CLS, build_router
    from chains.routers.artifacts import SHIPPED_ARTIFACT, promote, read_artifact, rollback
    from chains.routers.base import RouteContext
    from core.errors import TandemError

    params = read_artifact(SHIPPED_ARTIFACT)
    for name in ("similarity", "learned", "combined"):
        assert 0.0 <= build_router(name, params).score("how do I return an item", RouteContext()) <= 1.0
    assert set(ROUTER_CLS) >= {"similarity", "learned", "combined"}
    with pytest.raises(TandemError, match="unknown router"):
        build_router("no-such-router", params)

    runtime = make_runtime(settings, fresh_db(tmp_path), demo_kb)
    runtime.routers.check_s = 0.0  # skip the 2 s poll interval
    artifact = json.loads(SHIPPED_ARTIFACT.read_text())
    artifact["evidence"]["route"]["intercept"] = 50.0  # a candidate that sends everything to the LLM
    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps(artifact))
    version = promote(runtime.db, candidate, "test", "everything to the LLM")
    response = ask(runtime.service, "How long does standard shipping take to arrive?", session="promo")
    assert response.scores["p_llm"] > 0.99 and runtime.routers.version == version
    restored = rollback(runtime.db, "test")
    assert restored.version == 0 and restored.source == "shipped"
    assert ask(runtime.service, "how many days is standard delivery", session="promo2").scores["p_llm"] < 0.5
    with pytest.raises(TandemError, match="does not build"):
        promote(runtime.db, {"evidence": {"route": {"mean": [0.0]}}}, "test")


def test_a_corrupt_promoted_router_still_answers_logs_and_is_reported(settings, demo_kb, tmp_path):
    """Bug: a corrupt promoted router (or a settings error) gave HTTP 500 and no request row."""
    from storage.tables import RouterArtifact

    database = fresh_db(tmp_path)
    with database.session() as session:  # a row no promotion would write (promote() refuses it): bad params
        session.add(RouterArtifact(author="disk", params={"evidence": {"route": {"mean": "not numbers"}}}))
        session.commit()
    runtime = make_runtime(settings, database, demo_kb)
    response = ask(runtime.service, "how do I reset my password")
    assert response.route == "small" and row(runtime.service, response.request_id) is not None
    problem = runtime.status()["problems"][0]
    assert "unusable" in problem and "rollback" in problem


def test_a_broken_policy_read_is_answered_and_logged(settings, db, demo_kb):
    """An exception while starting a turn (policy, history) is inside the service's try: answer + row."""
    runtime = make_runtime(settings, db, demo_kb)

    class BrokenPolicy:  # a fault that cannot be produced for real without corrupting the shared database
        def current(self):
            raise RuntimeError("settings row unreadable")

    runtime.service.policy = BrokenPolicy()
    response = ask(runtime.service, "how do I reset my password")
    assert response.fallback and "went wrong" in response.answer
    assert "settings row unreadable" in row(runtime.service, response.request_id).error


def test_a_handoff_rule_queues_the_conversation_for_a_person_without_scoring_or_an_llm_call(settings, db, demo_kb,
                                                                                            tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: asks-for-a-person\n    pattern: '\\b(talk|speak) to a (human|person)\\b'\n"
                     "    route: handoff\n    reason: the customer asked for a person\n")
    runtime = make_runtime(settings.model_copy(update={"rules_path": rules}), db, demo_kb)
    handed = ask(runtime.service, "I want to talk to a human about my refund")
    assert handed.route == "handoff" and "colleague" in handed.answer
    assert "rule: asks-for-a-person -> handoff" in handed.reasons
    logged = row(runtime.service, handed.request_id)
    assert logged.route == "handoff" and "p_llm" not in (logged.scores or {})  # no score: the rule settled it
    assert not logged.model  # no LLM call
    with runtime.service.db.session() as session:
        queued = session.exec(select(Handoff).where(Handoff.request_id == handed.request_id)).all()
    assert len(queued) == 1 and "asks-for-a-person" in queued[0].note
    other = ask(runtime.service, "how do I reset my password")
    assert other.route != "handoff"


def test_a_small_rule_is_honoured(settings, db, demo_kb, tmp_path):
    """Bug: a rule with `route: small` was ignored (only `llm` plans were)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: keep-warranty-small\n    keywords: [warranty]\n    route: small\n")
    runtime = make_runtime(settings.model_copy(update={"rules_path": rules, "route_threshold": 0.0}), db, demo_kb)
    runtime.policy.save({"route_threshold": 0.0}, "test", "everything to the LLM, except what a rule keeps small")
    try:
        kept = ask(runtime.service, "is there a warranty on the speaker, and can you compare it with others?")
        other = ask(runtime.service, "compare your speakers with the ones from other shops please")
    finally:
        runtime.policy.save({"route_threshold": Thresholds.defaults(settings).route_threshold}, "test", "back to default")
    assert "small (rule)" in " ".join(kept.reasons)
    assert not any("(rule)" in r for r in other.reasons)
