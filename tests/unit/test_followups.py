"""chains/followups.py: the follow-up model (counts within sessions, backed off to the overall follow-up shares),
the state of a logged message, and the sessions read back from a real SQLite request log."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from chains.followups import ALPHA, FollowupModel, sessions_from_log, state_of
from storage.db import open_database
from storage.tables import RequestLog, utcnow

# Customers who read track_order ask change_address twice and cancel_order once; return_policy leads to start_return.
SESSIONS = [["track_order", "change_address", "shipping_times"],
            ["track_order", "change_address"],
            ["track_order", "cancel_order", "route:llm", "start_return"],
            ["return_policy", "start_return", "refund_timing"],
            ["return_policy", "start_return"]]


def test_fit_counts_transitions_within_each_session_and_none_across_sessions():
    model = FollowupModel.fit([["a", "b"], ["c", "a"]])
    assert model.counts == {"a": Counter({"b": 1}), "c": Counter({"a": 1})}  # no b -> c from one session to the next
    assert model.overall == Counter({"a": 1, "b": 1}) and model.transitions == 2


def test_a_states_own_followups_come_first_with_the_blended_probability():
    model = FollowupModel.fit(SESSIONS)
    total = sum(model.overall.values())  # 8 follow-ups that are answers (cancel_order -> route:llm is not)
    predicted = model.predict("track_order", k=3)
    assert [answer for answer, _ in predicted][:2] == ["change_address", "cancel_order"]
    own, seen = model.counts["track_order"], 3
    expected = (own["change_address"] + ALPHA * model.overall["change_address"] / total) / (seen + ALPHA)
    assert predicted[0][1] == pytest.approx(expected)


def test_an_unseen_state_backs_off_to_the_overall_followup_shares():
    model = FollowupModel.fit(SESSIONS)
    total = sum(model.overall.values())
    predicted = model.predict("warranty_claim", k=2)
    assert predicted == [("start_return", pytest.approx(3 / total)), ("change_address", pytest.approx(2 / total))]


def test_the_state_itself_is_never_predicted_even_when_it_follows_itself_most():
    model = FollowupModel.fit([["a", "a"], ["a", "a"], ["a", "b"], ["c", "a"]])
    assert model.counts["a"]["a"] == 2 and model.overall.most_common(1) == [("a", 3)]
    assert [answer for answer, _ in model.predict("a", k=3)] == ["b"]
    assert "a" in [answer for answer, _ in model.predict("c", k=3)]


def test_known_limits_the_followups_but_unknown_and_route_states_are_still_learned_from():
    model = FollowupModel.fit([["route:llm", "a"], ["retired", "b"], ["a", "retired"], ["a", "route:tool"]],
                              known={"a", "b"})
    assert set(model.overall) == {"a", "b"} and model.transitions == 2  # a -> retired and a -> route:tool not counted
    assert model.counts == {"route:llm": Counter({"a": 1}), "retired": Counter({"b": 1})}
    assert [answer for answer, _ in model.predict("route:llm", k=3)] == ["a", "b"]


def test_a_route_is_never_a_followup_without_known_either():
    model = FollowupModel.fit([["a", "route:llm", "b"]])
    assert model.overall == Counter({"b": 1}) and model.counts == {"route:llm": Counter({"b": 1})}


def test_an_unfitted_model_predicts_nothing():
    assert FollowupModel().predict("track_order") == []
    assert FollowupModel.fit([["a"], []]).predict("a") == []  # one-message sessions hold no transition


def test_k_and_min_share_cut_the_suggestions_and_ties_go_by_answer_id():
    model = FollowupModel.fit([["s", "d"], ["s", "c"], ["s", "b"], ["s", "a"], ["x", "e"]])
    assert [answer for answer, _ in model.predict("s", k=3)] == ["a", "b", "c"]  # four tied, by id
    shares = dict(model.predict("s", k=10))
    assert shares["e"] < 0.1 < shares["a"]
    assert "e" not in dict(model.predict("s", k=10, min_share=0.1)) and len(model.predict("s", k=10, min_share=0.1)) == 4


@pytest.mark.parametrize("route, served, sources, state", [
    ("small", "draft", [{"answer_id": "track_order"}], "track_order"),
    ("llm", "rewrite", [{"answer_id": "return_policy"}], "return_policy"),
    ("cache", "cache", [{"answer_id": "paypal"}, {"answer_id": "payment_methods"}], "paypal"),
    ("llm", "llm", [{"answer_id": "return_policy"}], "route:llm"),  # the LLM's own answer: not the KB answer
    ("small", "draft", [], "route:small"),
    ("small", "draft", [{"title": "no id"}], "route:small"),
    ("tool", "tool", [], "route:tool"),
    ("", "", [], "route:unknown"),
])
def test_state_of_a_logged_message(route, served, sources, state):
    assert state_of(route, served, sources) == state


@pytest.fixture
def log_db(tmp_path):
    return open_database(f"sqlite:///{tmp_path / 'followups'}.db").init()


def _log(db, rows: list[dict]) -> None:
    with db.session() as session:
        for row in rows:
            session.add(RequestLog(**row))
        session.commit()


def test_sessions_from_log_orders_each_sessions_states_by_time_and_leaves_out_what_it_should(log_db):
    now = utcnow()
    source = lambda answer_id: [{"answer_id": answer_id}]  # noqa: E731
    _log(log_db, [
        # s1, inserted out of order: read back oldest first
        dict(session_id="s1", created_at=now - timedelta(minutes=1), route="small", served="draft",
             sources=source("change_address")),
        dict(session_id="s1", created_at=now - timedelta(minutes=3), route="small", served="draft",
             sources=source("track_order")),
        dict(session_id="s1", created_at=now - timedelta(minutes=2), route="llm", served="llm"),
        dict(session_id="s2", created_at=now - timedelta(minutes=5), route="llm", served="rewrite",
             sources=source("return_policy")),
        dict(session_id="s2", created_at=now - timedelta(minutes=4), route="small", served="draft",
             sources=source("start_return")),
        dict(session_id="s2", created_at=now - timedelta(days=3), route="small", served="draft",
             sources=source("old")),                                               # before since
        dict(session_id="s3", created_at=now, route="small", served="draft", sources=source("paypal")),  # one message
        dict(session_id="", created_at=now, route="small", served="draft", sources=source("x")),         # no session
        dict(session_id="s4", created_at=now, channel="prepare", route="llm", served="llm"),
        dict(session_id="s4", created_at=now, channel="prepare", route="llm", served="llm"),
    ])
    sessions = sessions_from_log(log_db, now - timedelta(days=1), exclude_channels=["prepare"])
    assert sorted(sessions) == [["return_policy", "start_return"], ["track_order", "route:llm", "change_address"]]
    assert ["route:llm", "route:llm"] in sessions_from_log(log_db, now - timedelta(days=1))  # not excluded


def test_sessions_from_log_reads_the_newest_rows_only(log_db):
    now = utcnow()
    _log(log_db, [dict(session_id="s", created_at=now - timedelta(minutes=m), route="small", served="draft",
                       sources=[{"answer_id": f"a{m}"}]) for m in range(4)])
    assert sessions_from_log(log_db, now - timedelta(hours=1), limit=3) == [["a2", "a1", "a0"]]


def test_the_eval_replay_scores_top1_and_top3_over_answerable_and_all_next_turns():
    """offline/followup_eval.py: an out-of-scope next turn counts in "of all" only; a hit at rank 2 is top-3 only."""
    from offline.followup_eval import Message, labelled_states, popularity, replay

    model = FollowupModel.fit([["a", "b"], ["a", "b"], ["a", "c"], ["b", "d"]])
    session = [Message("s", t, "", answer) for t, answer in enumerate(["a", "c", "", "d"], 1)]
    # a -> c: c is 2nd (b first): top-3 hit; c -> out of scope: not answerable; route:llm -> d: d is among the overall
    assert replay(model, [labelled_states(session)], [session]) == {
        "transitions": 3, "answerable": 2, "top1": 0.0, "top3": 1.0, "top1_of_all": 0.0, "top3_of_all": 0.6667}
    assert popularity(model).predict("a") == FollowupModel(overall=model.overall).predict("a")
    assert popularity(model).counts == {} and model.counts  # the model itself is left as it was


def test_a_state_never_seen_leans_on_what_followed_other_answers_of_its_category():
    categories = {"track_order": "orders", "cancel_order": "orders", "change_order": "orders",
                  "return_policy": "returns", "start_return": "returns", "refund_timing": "refunds"}
    sessions = [["cancel_order", "change_order"]] * 3 + [["return_policy", "start_return"]] * 5
    flat = FollowupModel.fit(sessions, known=categories)
    tiered = FollowupModel.fit(sessions, known=categories, categories=categories)
    assert flat.predict("track_order", k=1)[0][0] == "start_return"  # overall the most frequent follow-up
    assert tiered.predict("track_order", k=1)[0][0] == "change_order"  # what follows an orders answer
    assert tiered.category("route:llm") == "route:llm" and tiered.category("track_order") == "orders"
