"""Console fixtures: a session database with a few hundred logged requests, and a signed-in AppTest."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import delete

APP = Path(__file__).resolve().parents[2] / "console" / "app.py"
PAGES = ["views/overview.py", "views/request_log.py", "views/tuning.py", "views/what_if.py",
         "views/knowledge_base.py", "views/router_training.py"]


@pytest.fixture(scope="session")
def traffic(db):
    from tests.console.traffic import fill

    return fill(300)


@pytest.fixture()
def clean_logins(db):
    """Each test starts with no sign-in history, so one test's throttle never locks another out."""
    from console.auth import ConsoleLogin, ensure_table
    from storage.db import session_scope

    def wipe() -> None:
        ensure_table()
        with session_scope() as session:
            session.exec(delete(ConsoleLogin))
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
def signed_in(traffic, clean_logins):
    at = new_app().run()
    sign_in(at, operator="alice")
    assert not at.exception, at.exception
    return at
