"""Access rules in their parts: the limiter's keys and expiry, the client address behind a proxy, the legacy API
token, the exposure refusal, and the demo picker on loopback only. The attacks over HTTP against a running app are in
test_trust_boundaries.py.

Also covered elsewhere, not repeated here: the console sign-in throttle (tests/console/), the bearer token on and
off (tests/ui/test_api_token.py), and uploads over TANDEM_MAX_UPLOAD_MB (test_bad_input_corpus.py, case
image-over-limit, and tests/ui/test_chat_gradio.py::test_upload_over_the_limit).
"""

from __future__ import annotations

import time

import pytest

from app.access import AccessDenied, Gate
from chains.ratelimit import LimitKeys, RateLimiter
from core.exposure import app_exposure_problem, is_loopback
from tests.api import api_client
from tests.conftest import make_runtime
from tests.ratelimit import start_clear_of_a_window_boundary


def limiter(**limits: int) -> RateLimiter:
    start_clear_of_a_window_boundary(needed_s=3)  # the tests below count exactly
    values = {"per_address": 0, "per_key": 0, "per_customer": 0, "total": 0, "llm_tokens": 0, **limits}
    return RateLimiter(**values)  # type: ignore[arg-type]


def test_the_address_limit_ignores_labels_and_counts_keys_and_customers_too():
    limits = limiter(per_address=3, per_customer=2)
    assert [limits.check(LimitKeys(address="192.0.2.1", key_id=f"k{i}")) for i in range(3)] == ["", "", ""]
    refusal = limits.check(LimitKeys(address="192.0.2.1", key_id="k-new"))
    assert "3 per 60 seconds" in refusal and "wait" in refusal
    assert limits.check(LimitKeys(address="192.0.2.2")) == ""  # another address is not affected
    # a signed customer is limited wherever they call from
    assert [limits.check(LimitKeys(address=f"198.51.100.{i}", customer="alice")) for i in range(3)][-1] != ""


def test_a_refused_message_costs_the_caller_nothing():
    limits = limiter(per_address=2, total=3)
    assert limits.check(LimitKeys(address="a")) == "" and limits.check(LimitKeys(address="a")) == ""
    assert limits.check(LimitKeys(address="a")) != ""          # refused: the total is not spent by it
    assert limits.check(LimitKeys(address="b")) == ""          # total 3: the third counted message
    assert "from everyone together" in limits.check(LimitKeys(address="c"))


def test_limiter_memory_is_bounded_100000_callers_leave_under_10000_keys():
    limits = RateLimiter(per_address=5, per_key=0, per_customer=0, total=0, llm_tokens=0, window_s=3)
    for i in range(100_000):
        limits.check(LimitKeys(address=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"))
    # Counters were held while their windows lasted (the loop takes seconds on 2 busy cores, so the first may be gone)
    assert limits.key_count() > 10_000
    time.sleep(6.5)  # the window (3 s) and the sliding counter's previous window have passed
    limits.check(LimitKeys(address="one-more"))  # expiry runs as the storage is used
    time.sleep(0.3)
    assert limits.key_count() < 10_000


def test_llm_token_budget_takes_tokens_until_the_minute_is_spent():
    limits = limiter(llm_tokens=200)
    assert limits.spend_llm_tokens("key:k1", 96) and limits.spend_llm_tokens("key:k1", 96)
    assert not limits.spend_llm_tokens("key:k1", 96)
    assert limits.spend_llm_tokens("key:k2", 96)  # the budget is each client's own


def gate(tmp_path, **settings_values) -> Gate:
    from core.settings import Settings

    return Gate(Settings(home=tmp_path, **settings_values), lambda: None)


def test_forwarded_for_counts_only_from_a_trusted_proxy(tmp_path):
    g = gate(tmp_path, trusted_proxies="127.0.0.1,10.0.0.0/8")
    assert g.address("127.0.0.1", "203.0.113.5") == "203.0.113.5"
    assert g.address("203.0.113.9", "127.0.0.1") == "203.0.113.9"                # an outsider cannot claim loopback
    assert g.address("10.1.2.3", "198.51.100.1, 203.0.113.5, 10.0.0.7") == "203.0.113.5"  # right-most untrusted hop
    assert g.address("127.0.0.1", "") == "127.0.0.1"


def test_a_caller_beyond_loopback_without_a_key_is_refused_and_on_loopback_may_chat(tmp_path):
    g = gate(tmp_path)
    with pytest.raises(AccessDenied) as refused:
        g.caller(path="/api/v1/chat", peer="203.0.113.5", headers={})
    assert refused.value.status == 401
    local = g.caller(path="/api/v1/chat", peer="127.0.0.1", headers={})
    assert local.scopes == frozenset({"chat"}) and not local.operator
    with pytest.raises(AccessDenied) as kb:
        g.caller(path="/api/v1/kb/answers", peer="127.0.0.1", headers={})
    assert kb.value.status == 403


def test_the_app_refuses_to_listen_beyond_loopback_without_a_key():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.168.1.4")
    problem = app_exposure_problem("0.0.0.0", has_api_key=False)
    assert "TANDEM_API_TOKEN" in problem and "tandem keys create" in problem
    assert app_exposure_problem("0.0.0.0", has_api_key=True) == ""
    assert app_exposure_problem("127.0.0.1", has_api_key=False) == ""


def test_tandem_serve_beyond_loopback_without_a_key_exits_naming_the_setting(tmp_path):
    from tests.conftest import run_cli

    result = run_cli("serve", "--host", "0.0.0.0", "--port", "1", env={"TANDEM_HOME": str(tmp_path),
                                                                     "TANDEM_API_TOKEN": ""}, timeout=120)
    assert result.returncode != 0 and "TANDEM_API_TOKEN" in result.stderr + result.stdout


@pytest.mark.slow
def test_the_demo_picker_is_shown_only_on_loopback(settings, db, small_kb):
    from app.media import MediaReader
    from app.ui import ChatHandlers

    for host, shown in (("127.0.0.1", True), ("0.0.0.0", False)):
        runtime = make_runtime(settings.model_copy(update={"host": host, "ui_user_picker": True}), db, small_kb)
        handlers = ChatHandlers(lambda runtime=runtime: runtime, MediaReader(runtime.settings),
                                Gate(runtime.settings, lambda: None))
        assert handlers.picker_shown() is shown, host
        assert handlers.who("alice", None) == ("alice" if shown else ""), host


@pytest.mark.slow
def test_api_token_guards_chat(settings, db, small_kb):
    guarded = settings.model_copy(update={"api_token": "t0ken"})
    with api_client(guarded, make_runtime(guarded, db, small_kb)) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = client.post("/api/v1/chat", json={"message": "hi"}, headers=headers)
            assert response.status_code == 401 and "Bearer" in response.json()["error"]
        ok = client.post("/api/v1/chat", json={"message": "hi"}, headers={"Authorization": "Bearer t0ken"})
        assert ok.status_code == 200
