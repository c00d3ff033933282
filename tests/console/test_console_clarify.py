"""The console's request log shows clarify turns: the route is offered in its filter (read from the log), and the
question's row shows the customer's choice as its feedback."""

from __future__ import annotations

import pytest

from chains.schema import ChatRequest
from tests.conftest import make_runtime
from tests.console.conftest import new_app, sign_in

pytestmark = pytest.mark.slow


def test_request_log_filters_clarify_turns_and_shows_the_choice_as_their_feedback(settings, db, demo_kb, clean_logins):
    service = make_runtime(settings.model_copy(update={"clarify": True}), db, demo_kb).service
    asked = service.answer(ChatRequest(message="how long", user_id="dora", channel="api"))
    assert asked.route == "clarify"
    service.answer(ChatRequest(message="How long is the warranty?", session_id=asked.session_id, user_id="dora",
                               channel="api", choice="warranty_length"))
    at = sign_in(new_app().run())
    assert not at.exception, at.exception
    at = at.switch_page("views/request_log.py").run()
    assert "clarify" in at.multiselect(key="req_routes").options
    at.multiselect(key="req_routes").set_value(["clarify"]).run()
    at.selectbox(key="req_pick").set_value(asked.request_id).run()
    assert not at.exception, at.exception
    assert any(m.label == "Route" and m.value == "clarify" for m in at.metric)
    feedback = at.dataframe[-1].value
    assert list(feedback["answer_id"]) == ["warranty_length"] and list(feedback["rating"]) == [1]
