"""Two app replicas on Redis, PostgreSQL and a Chroma server behind nginx, on loopback (tests/cluster/conftest.py).

The first tests prove what replicas share; the fault tests at the end break one part at a time and check that
every request is answered and logged (they restart what they broke, so their order does not matter)."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlmodel import col, select

from storage.tables import ChatMessage, ConsoleLogin, Feedback, RequestLog
from tests.cluster.conftest import RATE_LIMIT, TOKEN, chat
from tests.ratelimit import start_clear_of_a_window_boundary


def healthz(url: str) -> dict:
    return httpx.get(f"{url}/healthz", timeout=30).json()


def rows_for(db, texts: list[str]) -> list[RequestLog]:
    with db.session() as session:
        return list(session.exec(select(RequestLog).where(col(RequestLog.text).in_(texts))))


def wait_until(check, timeout: float, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)


# --- what replicas share -------------------------------------------------------------------------------
def test_exact_and_semantic_cache_hits_made_on_one_replica_are_hits_on_the_other(cluster):
    one, two = cluster.replica_url(0), cluster.replica_url(1)
    question = "How long does standard shipping take to arrive?"
    first = chat(one, question, "cache-1").json()
    assert first["route"] in ("small", "llm"), first["reasons"]
    exact = chat(two, question, "cache-2").json()
    assert exact["route"] == "cache" and "exact hit" in exact["reasons"][-1], exact["reasons"]
    semantic = chat(two, "how long does the standard shipping take to arrive", "cache-3").json()
    assert semantic["route"] == "cache" and "semantic hit" in semantic["reasons"][-1], semantic["reasons"]
    assert healthz(two)["state"]["backend"] == "redis"


def test_one_rate_limit_holds_across_replicas(cluster):
    urls = [cluster.replica_url(0), cluster.replica_url(1)]
    start_clear_of_a_window_boundary(needed_s=30)
    statuses = [chat(urls[i % 2], f"what are your opening hours? ({i})", "rl-user", f"rl-session-{i}").status_code
                for i in range(RATE_LIMIT + 2)]
    assert statuses.count(429) == 2 and statuses[:RATE_LIMIT].count(200) == RATE_LIMIT, statuses


def test_a_threshold_saved_in_the_console_is_applied_by_both_replicas_within_3_s(cluster, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from core.settings import reset_settings
    from tests.console.conftest import APP, sign_in

    monkeypatch.setenv("TANDEM_DATABASE_URL", cluster.database_url)
    reset_settings()
    try:
        from console.accounts import add_operator

        add_operator(cluster_database(cluster), "cluster-op", "cluster-op-pw")  # an account in the shared PostgreSQL
        at = AppTest.from_file(str(APP), default_timeout=60).run()
        sign_in(at, password="cluster-op-pw", operator="cluster-op")
        at = at.switch_page("views/tuning.py").run()
        at.number_input(key="tune_route_threshold").set_value(0.37)
        at.text_input(key="tune_reason").set_value("cluster test")
        next(b for b in at.button if b.label == "Save new version").click().run()
        assert not at.exception and not at.error
        saved = time.monotonic()
    finally:
        monkeypatch.delenv("TANDEM_DATABASE_URL")
        reset_settings()
    from storage import policy_store

    version = policy_store.current(cluster_database(cluster)).version
    for index in (0, 1):
        assert wait_until(lambda index=index: healthz(cluster.replica_url(index))["settings_version"] == version, 5)
    assert time.monotonic() - saved < 3.5
    for index, message in enumerate(["Do you ship to Canada?", "Can I pay with PayPal?"]):
        reasons = chat(cluster.replica_url(index), message, f"tau-{index}").json()["reasons"]
        assert any("tau 0.37" in reason for reason in reasons), reasons
    with cluster_database(cluster).session() as session:  # the console's sign-in landed in PostgreSQL too
        assert session.exec(select(ConsoleLogin).where(ConsoleLogin.operator == "cluster-op")).first() is not None


def cluster_database(cluster):
    from storage.db import Database

    return Database(cluster.database_url)


def test_a_router_promoted_from_the_cli_is_live_on_both_replicas_within_3_s(cluster, tmp_path):
    from chains.routers.artifacts import SHIPPED_ARTIFACT

    env = {**os.environ, **cluster.env()}
    promoted = subprocess.run([str(Path(sys.executable).parent / "tandem"), "router", "promote",
                               str(SHIPPED_ARTIFACT), "--note", "cluster test"], env=env,
                              capture_output=True, text=True, timeout=120)
    assert promoted.returncode == 0, promoted.stderr
    version = int(promoted.stdout.split("router v")[1].split()[0])
    started = time.monotonic()
    for index in (0, 1):
        assert wait_until(lambda index=index: healthz(cluster.replica_url(index))["router_version"] == version, 5)
    assert time.monotonic() - started < 3.5
    rolled = subprocess.run([str(Path(sys.executable).parent / "tandem"), "router", "rollback"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert rolled.returncode == 0 and "router v0" in rolled.stdout, rolled.stdout + rolled.stderr


def test_a_kb_answer_added_through_one_replica_is_served_by_the_other_within_5_s(cluster):
    body = {"answers": [{"answer_id": "gift_wrapping", "title": "Gift wrapping",
                         "answer": "We gift-wrap any order for 4 EUR: tick 'gift wrap' at checkout.",
                         "questions": ["do you offer gift wrapping", "can you wrap my order as a present"]}]}
    refused = httpx.post(f"{cluster.replica_url(0)}/api/v1/kb/answers", json=body, timeout=60)
    assert refused.status_code == 401
    added = httpx.post(f"{cluster.replica_url(0)}/api/v1/kb/answers", json=body, timeout=120,
                       headers={"Authorization": f"Bearer {TOKEN}"})
    assert added.status_code == 200, added.text
    started = time.monotonic()

    def served() -> bool:
        answer = chat(cluster.replica_url(1), "do you offer gift wrapping?", f"kb-{time.monotonic()}").json()
        return any(s["answer_id"] == "gift_wrapping" for s in answer.get("sources", []))

    assert wait_until(served, 10, every=0.5)
    assert time.monotonic() - started < 5 + 1.5  # 5 s to reach the replica, plus the request that saw it


def test_orders_feedback_and_conversation_memory_work_on_postgresql(cluster, cluster_db):
    url = cluster.balancer_url
    order = chat(url, "where is my order NW-104233?", "alice", "pg-session").json()
    assert order["route"] == "tool" and "NW-104233" in order["answer"]
    rated = httpx.post(f"{url}/api/v1/feedback", json={"request_id": order["request_id"], "rating": 1},
                       headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert rated.status_code == 200
    follow_up = chat(url, "and when will it arrive?", "alice", "pg-session").json()
    with cluster_db.session() as session:
        assert session.get(RequestLog, follow_up["request_id"]) is not None
        assert session.exec(select(Feedback).where(Feedback.request_id == order["request_id"])).first().rating == 1
        turns = session.exec(select(ChatMessage).where(ChatMessage.session_id == "pg-session")
                             .order_by(ChatMessage.id)).all()  # the order the app reads history in
        assert [m.role for m in turns] == ["user", "assistant", "user", "assistant"]


# --- faults ----------------------------------------------------------------------------------------------
def send_all(url: str, texts: list[str], workers: int = 6, on_progress=None) -> list[httpx.Response]:
    def one(index_text):
        index, text = index_text
        if on_progress is not None:
            on_progress(index)
        return chat(url, text, f"fault-user-{index}", f"fault-{index}")

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, enumerate(texts)))


def assert_all_logged(db, texts: list[str], timeout: float = 30) -> None:
    logged = wait_until(lambda: {r.text for r in rows_for(db, texts)} >= set(texts) or None, timeout, 1.0)
    missing = set(texts) - {r.text for r in rows_for(db, texts)}
    assert logged and not missing, f"{len(missing)} of {len(texts)} requests not logged: {sorted(missing)[:5]}"


def test_a_replica_killed_mid_traffic_loses_no_request(cluster, cluster_db):
    texts = [f"how do I return an item I bought? (kill test {i})" for i in range(30)]
    killed = []

    def kill_at_ten(index: int) -> None:
        if index == 10 and not killed:
            killed.append(True)
            cluster.children["app2"].kill()

    try:
        responses = send_all(cluster.balancer_url, texts, on_progress=kill_at_ten)
        assert [r.status_code for r in responses] == [200] * len(texts)
        assert_all_logged(cluster_db, texts)
        duplicates = len(rows_for(cluster_db, texts)) - len(texts)
        print(f"replica kill: {len(texts)} sent, {len(texts)} logged, {duplicates} answered twice (retried)")
    finally:
        cluster.start_part("app2")
        assert cluster.children["app2"].wait_http(cluster.replica_url(1) + "/healthz", 300)


def test_with_redis_stopped_replicas_answer_with_local_state_and_say_so(cluster, cluster_db):
    cluster.stop_part("redis")
    texts = [f"what payment methods do you accept? (redis test {i})" for i in range(8)]
    try:
        responses = [chat(cluster.replica_url(i % 2), text, f"redis-user-{i}") for i, text in enumerate(texts)]
        assert [r.status_code for r in responses] == [200] * len(texts)
        for index in (0, 1):
            health = healthz(cluster.replica_url(index))
            assert any("Redis unreachable" in p for p in health["problems"]), health["problems"]
            assert health["status"] == "degraded"
        assert_all_logged(cluster_db, texts)
    finally:
        cluster.start_part("redis")
    time.sleep(5.5)  # the replicas try Redis again after 5 s
    chat(cluster.replica_url(0), "what payment methods do you accept?", "redis-back")
    assert not [p for p in healthz(cluster.replica_url(0))["problems"] if "Redis" in p]


def test_while_postgresql_restarts_rows_are_buffered_and_none_is_lost(cluster, cluster_db):
    cluster.stop_part("postgres")
    texts = [f"can I change my delivery address? (pg test {i})" for i in range(8)]
    try:
        responses = [chat(cluster.replica_url(i % 2), text, f"pg-user-{i}") for i, text in enumerate(texts)]
        assert [r.status_code for r in responses] == [200] * len(texts)
        assert all(healthz(cluster.replica_url(i))["log_backlog"] > 0 for i in (0, 1))
    finally:
        cluster.start_part("postgres")
    # the next request on each replica writes its backlog first
    for index in (0, 1):
        assert chat(cluster.replica_url(index), "thanks!", f"pg-after-{index}").status_code == 200
    assert_all_logged(cluster_db, texts)
    assert all(healthz(cluster.replica_url(i))["log_backlog"] == 0 for i in (0, 1))


def test_with_the_chroma_server_stopped_answers_come_from_the_loaded_index(cluster, cluster_db):
    cluster.stop_part("chroma")
    texts = ["can I return a sale item", "do you price match", "how do I reset my password",
             "is my payment information secure", "do you sell gift cards", "can I cancel my order after paying"]
    try:
        time.sleep(2.5)  # past the replicas' change-check interval, so they do try the stopped server
        responses = [chat(cluster.replica_url(i % 2), text, f"chroma-user-{i}") for i, text in enumerate(texts)]
        assert [r.status_code for r in responses] == [200] * len(texts)
        # each from the loaded index: a draft's citation, or the close answers the small tier asked to choose from
        answered = [(r.json()["route"], [src["answer_id"] for src in r.json()["sources"] or r.json().get("suggestions", [])])
                    for r in responses]
        assert all(route in ("small", "llm") and found for route, found in answered), answered
        assert_all_logged(cluster_db, texts)
    finally:
        cluster.start_part("chroma")


@pytest.mark.parametrize("index", [0, 1])
def test_both_replicas_are_healthy_after_the_faults(cluster, index):
    health = healthz(cluster.replica_url(index))
    assert health["ready"] and health["state"]["backend"] == "redis", health
