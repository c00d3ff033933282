"""Learning from the operator, end to end without an LLM: a question the knowledge base does not cover is handed to a
person by the "Talk to a human" button, the operator answers, the reply appears as a proposed KB answer, an agent
approves it over the API, and the same question from a new customer is answered by the small tier citing the new
answer (then served from the cache, the new answer vouching for it). Real encoder, Chroma (a KB of the test's own,
since approving writes to it), SQLite and the real /api/v1 in-process."""

from __future__ import annotations

import pytest
from sqlmodel import select

from app.ui import ChatHandlers
from chains.learning import APPROVED, PROPOSED
from tests.api import api_client
from tests.conftest import fresh_db, make_runtime
from tests.console.conftest import clean_logins  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow
DOG = "Can I bring my dog into your Seattle showroom?"  # nothing in the demo KB answers it
REPLY = "Yes: dogs on a leash are welcome in our Seattle showroom, and there is a water bowl by the door."


@pytest.fixture(scope="module")
def own_kb(encoder, tmp_path_factory):
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.demo_kb import DEMO_FILES

    kb = ChromaKnowledgeBase(encoder, path=tmp_path_factory.mktemp("learning-kb") / "chroma")
    kb.ingest(DEMO_FILES, progress=False)
    return kb


@pytest.fixture(scope="module")
def learning_app(settings, own_kb, tmp_path_factory):
    from storage.api_keys import create_key

    db = fresh_db(tmp_path_factory.mktemp("learning-db"))
    runtime = make_runtime(settings, db, own_kb, use_llm=False)
    key = create_key(db, "dana", ["agent"])
    shop = create_key(db, "shop-backend", ["chat"])  # with keys made, the chat needs one too
    try:
        with api_client(settings, runtime) as api:
            api.headers["Authorization"] = f"Bearer {shop}"
            yield api, runtime, {"Authorization": f"Bearer {key}"}
    finally:
        runtime.close()


def test_an_operators_answer_once_approved_lets_the_small_tier_answer_the_question(learning_app, own_kb):
    api, runtime, agent = learning_app
    answers_before = len(own_kb)
    asked = api.post("/api/v1/chat", json={"message": DOG}).json()
    session_id = asked["session_id"]
    assert not any(s["answer_id"].startswith("operator_") for s in asked["sources"])
    button = ChatHandlers(lambda: runtime, reader=None, gate=None)  # type: ignore[arg-type]  # the chat's button
    button.talk_to_human(session_id, {0: asked["request_id"]}, "")
    item = next(c for c in api.get("/api/v1/inbox", headers=agent).json()["conversations"]
                if c["session_id"] == session_id)
    assert item["trigger"] == "button" and item["packet"]["question"] == DOG
    assert api.post(f"/api/v1/inbox/{session_id}/claim", headers=agent).status_code == 200
    assert api.post(f"/api/v1/inbox/{session_id}/reply", headers=agent, json={"text": REPLY}).status_code == 200

    proposals = api.get("/api/v1/inbox/proposals", headers=agent).json()["proposals"]
    assert len(proposals) == 1
    proposal = proposals[0]
    assert (proposal["status"], proposal["question"], proposal["answer"], proposal["operator"]) == (
        PROPOSED, DOG, REPLY, "dana")
    assert proposal["merge_into"] == "" and proposal["coverage"]["covered"] is False  # a new answer
    assert proposal["coverage"]["route"] == "llm"  # the router sent it to the LLM: the KB did not cover it

    approved = api.post(f"/api/v1/inbox/proposals/{proposal['id']}/approve", headers=agent)
    assert approved.status_code == 200, approved.text
    body = approved.json()
    new_id = f"operator_{proposal['id']}"
    assert body["status"] == APPROVED and body["answer_id"] == new_id and body["decided_by"] == "dana"
    assert body["check"]["answered_by_small"] is True, body["check"]  # re-asked through the chain
    assert body["check"]["route"] == "small" and new_id in body["check"]["cites"]
    assert len(own_kb) == answers_before + 1 and own_kb.answer_texts()[new_id] == REPLY
    again = api.post(f"/api/v1/inbox/proposals/{proposal['id']}/approve", headers=agent)
    assert again.status_code == 409 and "approved already" in again.json()["error"]

    new_customer = api.post("/api/v1/chat", json={"message": DOG}).json()  # no session: someone else
    assert new_customer["session_id"] != session_id
    assert new_customer["route"] == "small", new_customer
    assert [s["answer_id"] for s in new_customer["sources"]][:1] == [new_id]
    assert "leash" in new_customer["answer"]
    third = api.post("/api/v1/chat", json={"message": DOG}).json()  # the human answer vouches for the cached one
    assert third["route"] == "cache" and [s["answer_id"] for s in third["sources"]][:1] == [new_id]


def test_a_reply_that_repeats_an_existing_answer_is_proposed_as_that_answers_new_example_question(learning_app, own_kb):
    api, runtime, agent = learning_app
    question = "Do you offer engraving on the wooden cutting boards?"  # its best passage is a weak match
    canned = own_kb.answer_texts()["product_care"]  # the operator sends a KB answer as the canned reply
    asked = api.post("/api/v1/chat", json={"message": question}).json()
    conversations = runtime.service.conversations
    ChatHandlers(lambda: runtime, reader=None, gate=None).talk_to_human(  # type: ignore[arg-type]
        asked["session_id"], {0: asked["request_id"]}, "")
    conversations.claim(asked["session_id"], "dana")
    conversations.reply(asked["session_id"], "dana", canned)
    proposal = next(p for p in api.get("/api/v1/inbox/proposals", headers=agent).json()["proposals"]
                    if p["session_id"] == asked["session_id"])
    assert proposal["merge_into"] == "product_care" and proposal["similarity"] >= 0.8
    assert proposal["coverage"]["weak_match"] is True
    examples = {e["answer_id"]: e["questions"] for e in own_kb.entries()}
    answers = len(own_kb)
    body = api.post(f"/api/v1/inbox/proposals/{proposal['id']}/approve", headers=agent).json()
    assert body["answer_id"] == "product_care" and len(own_kb) == answers  # no new answer: a merge
    assert {e["answer_id"]: e["questions"] for e in own_kb.entries()}["product_care"] == examples["product_care"] + 1
    assert "product_care" in body["check"]["cites"]


def test_a_question_the_kb_covers_proposes_nothing(learning_app):
    api, runtime, agent = learning_app
    asked = api.post("/api/v1/chat", json={"message": "How do I reset my password?"}).json()
    conversations = runtime.service.conversations
    ChatHandlers(lambda: runtime, reader=None, gate=None).talk_to_human(  # type: ignore[arg-type]
        asked["session_id"], {0: asked["request_id"]}, "")
    conversations.claim(asked["session_id"], "dana")
    conversations.reply(asked["session_id"], "dana", "Use the Forgot password link on the sign-in page.")
    assert asked["session_id"] not in {p["session_id"] for p in
                                       api.get("/api/v1/inbox/proposals", headers=agent).json()["proposals"]}


@pytest.mark.usefixtures("clean_logins")
def test_the_console_shows_the_handoff_numbers_and_approves_a_proposal_in_one_click(settings, db, own_kb, monkeypatch):
    """The overview's handoff numbers (the session database's stored events) and the Learned answers page: one click
    approves, ingests and re-asks (the console's learning loop over this test's KB)."""
    from chains.handoff_stats import handoff_numbers
    from console import data, ui
    from storage.tables import ConversationEvent, ConversationState, KbProposal
    from tests.console.conftest import new_app, sign_in

    question = "Is there parking for customers at the Seattle showroom?"
    runtime = make_runtime(settings, db, own_kb, use_llm=False)
    monkeypatch.setattr(ui, "learning", lambda: runtime.learning)  # this test's KB, not the home one
    conversations = runtime.service.conversations
    conversations.hand_off("console-learn-1", "button", "pressed the button")
    conversations.claim("console-learn-1", "operator")
    with db.session() as session:
        session.add(KbProposal(session_id="console-learn-1", question=question, operator="operator",
                               answer="Yes: the showroom has twelve free customer parking spaces behind the building."))
        session.commit()
    try:
        at = sign_in(new_app().run())
        assert not at.exception, at.exception
        numbers = handoff_numbers(db, data.since_for("last 24 h")).summary()
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Handoffs"] == f"{numbers['handoffs']:,}" and numbers["by_reason"]["button"] >= 1
        assert metrics["Time to pick up (p50)"] != "–"  # our claim at least
        at = at.switch_page("views/proposals.py").run()
        assert not at.exception, at.exception
        with db.session() as session:
            ours = next(p for p in session.exec(select(KbProposal))
                        if p.session_id == "console-learn-1")
        at = at.button(key=f"proposal_approve_{ours.id}").click().run()
        assert not at.exception, at.exception
        approved = runtime.learning.get(ours.id)
        assert approved.status == "approved" and approved.decided_by == "operator"
        assert approved.check["answered_by_small"] is True, approved.check
        assert f"operator_{ours.id}" in own_kb.answer_texts()
        assert any("approved and ingested" in s.value for s in at.success)
        assert not [b for b in at.button if b.key == f"proposal_approve_{ours.id}"]  # decided: no button any more
    finally:
        runtime.close()
        with db.session() as session:
            for table in (ConversationState, ConversationEvent, KbProposal):
                for row in session.exec(select(table)).all():
                    if row.session_id == "console-learn-1":
                        session.delete(row)
            session.commit()


def test_a_customer_who_asked_for_a_person_in_words_is_learned_from_with_the_question_they_asked_before(learning_app):
    api, runtime, agent = learning_app
    earlier = "Can I book a private shopping appointment at the Seattle showroom after hours?"
    first = api.post("/api/v1/chat", json={"message": earlier}).json()
    asked = api.post("/api/v1/chat", json={"message": "talk to a human please", "session_id": first["session_id"]})
    assert asked.json()["route"] == "handoff"
    session_id = first["session_id"]
    assert runtime.service.conversations.state(session_id).trigger == "asked"
    api.post(f"/api/v1/inbox/{session_id}/claim", headers=agent)
    api.post(f"/api/v1/inbox/{session_id}/reply", headers=agent,
             json={"text": "Yes, write to the showroom team and they will book an evening slot for you."})
    proposal = next(p for p in api.get("/api/v1/inbox/proposals", headers=agent).json()["proposals"]
                    if p["session_id"] == session_id)
    assert proposal["question"] == earlier  # not "talk to a human please"
    rejected = api.post(f"/api/v1/inbox/proposals/{proposal['id']}/reject", headers=agent)
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    assert api.post(f"/api/v1/inbox/proposals/{proposal['id']}/approve", headers=agent).status_code == 409
    assert api.post("/api/v1/inbox/proposals/999999/approve", headers=agent).status_code == 404
    assert api.get("/api/v1/inbox/proposals").status_code == 403  # a chat key is no agent key
