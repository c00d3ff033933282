"""The console's "Recurring questions" page lists the largest group of LLM-bound questions in the time range, with
its personal flag (request-log rows in the session database, embedded by the console's own knowledge base)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import delete

from storage.tables import RequestLog
from tests.console.conftest import new_app, sign_in

pytestmark = pytest.mark.slow

ADVICE = ["which tent would you recommend for winter camping in the mountains?",
          "what tent should i buy for camping in the snow?",
          "can you suggest a good tent for cold weather mountain camping?",
          "recommend me a winter tent for mountain trips please",
          "best tent for snowy mountain camping?"]
PERSONAL = ["write a complaint about my order [order], it arrived broken",
            "please draft a complaint for order [order] which came broken"]


@pytest.fixture()
def logged(db):
    now = datetime.now(UTC)
    rows = [RequestLog(created_at=now - timedelta(minutes=10 - i), text=text, route="llm", served="llm",
                       session_id=f"recurring-{i}") for i, text in enumerate(ADVICE + PERSONAL)]
    ids = [row.id for row in rows]
    with db.session() as session:
        session.add_all(rows)
        session.commit()
    yield
    with db.session() as session:
        session.exec(delete(RequestLog).where(RequestLog.id.in_(ids)))  # type: ignore[attr-defined]
        session.commit()


def test_the_page_lists_the_largest_group_first_and_flags_a_personal_group(logged, clean_logins):
    at = sign_in(new_app().run())
    assert not at.exception, at.exception
    at = at.switch_page("views/recurring.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    top = table.iloc[0]
    assert top["question"] in ADVICE and top["count"] == len(ADVICE) and top["sessions"] == len(ADVICE)
    assert not top["personal"]
    personal = table[table["question"].isin(PERSONAL)]
    assert len(personal) == 1 and personal.iloc[0]["personal"] and personal.iloc[0]["personal_data"] == "order"
