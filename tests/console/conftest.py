"""Console fixtures: the session database filled with real traffic through the service, and a signed-in AppTest."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlmodel import delete

from tests.llm_server import live

APP = Path(__file__).resolve().parents[2] / "console" / "app.py"
PAGES = ["views/overview.py", "views/request_log.py", "views/recurring.py", "views/prepared.py",
         "views/tuning.py", "views/what_if.py",
         "views/knowledge_base.py", "views/router_training.py", "views/catalog.py", "views/alerts.py",
         "views/autopilot.py", "views/inbox.py", "views/proposals.py"]


@pytest.fixture(scope="session")
def traffic(settings, db, demo_kb, llm_server_process):
    """Real requests of every route (small, cache, tool, guard, llm, degraded), logged by the chain itself."""
    from tests.conftest import make_runtime
    from tests.console.traffic import drive
    from tests.vllm_load import saturated, wait_for

    url = live(llm_server_process).url
    runtime = make_runtime(settings.model_copy(update={"llm_url": url}), db, demo_kb, use_llm=True)
    defaults = runtime.policy.current()
    runtime.policy.save({"overload_enter": 0.75, "overload_exit": 0.3}, "test", "degrade when vLLM queues")

    @contextmanager
    def saturate():
        with saturated(url, "smollm2", requests=12) as load:
            load.queued(at_least=3)
            assert wait_for(lambda: not runtime.llm.admit("someone")[0], 30), runtime.llm.status()
            yield

    try:
        result = drive(runtime, saturate)
    finally:
        runtime.policy.save({"overload_enter": defaults.overload_enter, "overload_exit": defaults.overload_exit},
                            "test", "default load gate")
        runtime.close()
    routes = result.routes()
    assert {"small", "cache", "tool", "guard", "llm", "degraded"} <= set(routes), routes
    return result


ALICE_PASSWORD = "alice-console-pw"


@pytest.fixture()
def clean_logins(db):
    """Each test starts with no sign-in history and no operator accounts (so the shared password is on), and leaves
    none: one test's throttle never locks another out, and one test's accounts never turn another's password off."""
    from storage.tables import ConsoleLogin, Operator

    def wipe() -> None:
        with db.session() as session:
            session.exec(delete(ConsoleLogin))
            session.exec(delete(Operator))
            session.commit()

    wipe()
    yield
    wipe()


def new_app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(APP), default_timeout=60)


def sign_in(at, password: str = "tandem", operator: str = "operator"):
    at.text_input(key="sign_in_operator").set_value(operator)
    at.text_input(key="sign_in_password").set_value(password)
    at.button[0].click()
    return at.run()


@pytest.fixture()
def signed_in(traffic, clean_logins, db):
    """A console session signed in with the operator account "alice" (removed again after the test)."""
    from console.accounts import add_operator

    add_operator(db, "alice", ALICE_PASSWORD)
    at = new_app().run()
    sign_in(at, password=ALICE_PASSWORD, operator="alice")
    assert not at.exception, at.exception
    return at
