"""The handoff's numbers (chains/handoff_stats.py) from a scripted sequence of real state changes on a real database:
time to pick up, time to the first human reply, handoffs by reason, the share of conversations resolved without a
person; the same numbers at /metrics (read from the database at the scrape), and the first-reply histogram."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from chains.conversation import Conversations
from chains.handoff_stats import handoff_numbers
from storage.tables import RequestLog, utcnow
from tests.api import api_client
from tests.conftest import fresh_db, make_runtime

pytestmark = pytest.mark.slow


class Clock:
    def __init__(self, start):
        self.now = start

    def __call__(self):
        return self.now


@pytest.fixture
def scripted(tmp_path):
    """Four customer conversations (and one batch row that is no conversation), three of them handed to a person,
    one twice, at known times."""
    db = fresh_db(tmp_path)
    t0 = utcnow() - timedelta(hours=1)
    clock = Clock(t0)
    conversations = Conversations(db, clock=clock)

    def at(seconds: float) -> None:
        clock.now = t0 + timedelta(seconds=seconds)

    with db.session() as session:
        for i, session_id in enumerate(("s1", "s2", "s3", "s4")):
            session.add(RequestLog(session_id=session_id, channel="api", route="small", text="hi",
                                   created_at=t0 + timedelta(seconds=i)))
        session.add(RequestLog(session_id="batch-1", channel="batch", route="small", created_at=t0))
        session.commit()
    first_replies = REGISTRY.get_sample_value("tandem_handoff_first_reply_seconds_count") or 0.0
    at(0)
    conversations.hand_off("s1", "button", "pressed the button")
    at(10)
    conversations.hand_off("s2", "asked", "asked in words")
    at(20)
    conversations.hand_off("s3", "answer_check", "failed its checks")
    at(30)
    conversations.claim("s1", "dana")        # picked up after 30 s
    at(45)
    conversations.reply("s1", "dana", "Hi, Dana here.")   # first reply 45 s after the handoff
    at(70)
    conversations.claim("s2", "eli")         # picked up after 60 s
    at(100)
    conversations.reply("s1", "dana", "Anything else?")   # not a first reply
    conversations.cancel("s3")               # never picked up
    at(190)
    conversations.reply("s2", "eli", "Eli here, sorry for the wait.")  # first reply 180 s after the handoff
    at(195)
    conversations.release("s1", "dana", "done")
    at(200)
    conversations.hand_off("s1", "rule", "a rule handed it over again")
    at(260)
    conversations.claim("s1", "dana")        # picked up after 60 s; no reply to this handoff
    return db, t0, REGISTRY.get_sample_value("tandem_handoff_first_reply_seconds_count") - first_replies


def test_the_numbers_follow_the_stored_changes(scripted):
    db, t0, observed = scripted
    numbers = handoff_numbers(db, since=t0 - timedelta(seconds=1))
    assert numbers.by_reason == {"button": 1, "asked": 1, "answer_check": 1, "rule": 1} and numbers.handoffs == 4
    assert sorted(numbers.pickup_s) == [30.0, 60.0, 60.0]
    assert sorted(numbers.first_reply_s) == [45.0, 180.0]  # the second handoff of s1 got no reply yet
    assert (numbers.sessions, numbers.handed_over) == (4, 3)  # the batch row is no customer conversation
    assert numbers.resolved_without_person == 0.25
    summary = numbers.summary()
    assert summary["pickup_p50_s"] == 60.0 and summary["first_reply_p50_s"] == 112.5
    # A window that starts after the first handoffs sees only what happened in it.
    late = handoff_numbers(db, since=t0 + timedelta(seconds=150))
    assert late.by_reason == {"rule": 1} and late.pickup_s == [60.0] and late.first_reply_s == []
    assert observed == 2  # this process's histogram saw the two first replies, not the third message


def test_metrics_exposes_them_from_the_database(scripted, settings, demo_kb):
    db, _, _ = scripted
    runtime = make_runtime(settings, db, demo_kb, use_llm=False)
    try:
        with api_client(settings, runtime) as api:
            text = api.get("/metrics").text
    finally:
        runtime.close()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples
               if s.name.startswith("tandem_handoff_window")}
    day = ("window", "1d")
    assert samples[("tandem_handoff_window_handoffs", (("trigger", "button"), day))] == 1
    assert samples[("tandem_handoff_window_handoffs", (("trigger", "rule"), day))] == 1
    assert samples[("tandem_handoff_window_pickup_seconds", (("quantile", "0.5"), day))] == 60.0
    assert samples[("tandem_handoff_window_pickup_count", (day,))] == 3
    assert samples[("tandem_handoff_window_first_reply_seconds", (("quantile", "0.5"), day))] == 112.5
    assert samples[("tandem_handoff_window_sessions", (day,))] == 4
    assert samples[("tandem_handoff_window_resolved_without_person_ratio", (day,))] == 0.25
    assert "tandem_handoff_first_reply_seconds_bucket" in text  # the per-process histogram beside them
