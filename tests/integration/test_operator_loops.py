"""Operator loops against a running runtime, on real parts (MiniLM, Chroma, SQLite, the Streamlit console):
an edited rules.yaml, a `tandem kb ingest` from another process, and feedback -> retrained router -> promotion."""

from __future__ import annotations

import csv
import json
import shutil
import time

import pytest

from chains.schema import ChatRequest
from tests.conftest import DEMO, REPO, fresh_db, make_runtime, run_cli

pytestmark = pytest.mark.slow

PLATINUM_RULE = ("  - name: platinum-members\n"
                 "    keywords: [platinum membership]\n"
                 "    route: llm\n"
                 "    reason: \"platinum members always get the careful model\"\n")


def ask(runtime, text, user="alice", session=""):
    return runtime.service.answer(ChatRequest(message=text, user_id=user, session_id=session, channel="api"))


def threshold_decision(response) -> str:
    return next(step["decision"] for step in response.trace if step["stage"] == "threshold")


def rules_decision(response) -> str:
    return next(step["decision"] for step in response.trace if step["stage"] == "rules")


def add_rule(path, text: str) -> None:
    """Append a rule as an operator's editor would, and make sure the edit is visible as a new mtime."""
    before = path.stat().st_mtime_ns
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n" + text, encoding="utf-8")
    if path.stat().st_mtime_ns == before:  # coarse file-system clock: two writes within one tick
        time.sleep(0.05)
        path.touch()
    assert path.stat().st_mtime_ns != before


@pytest.fixture
def rules_runtime(settings, demo_kb, tmp_path):
    """A runtime over a copy of the shipped rules.yaml (no LLM: the decision is what is checked, not the tier)."""
    rules = tmp_path / "rules.yaml"
    shutil.copy(REPO / "chains" / "rules.yaml", rules)
    runtime = make_runtime(settings.model_copy(update={"rules_path": rules}), fresh_db(tmp_path), demo_kb)
    return runtime, rules


# --- 1. rules.yaml edited on disk -----------------------------------------------------------------
def test_an_edited_rules_file_routes_the_next_message_by_the_new_rule_without_restart(rules_runtime):
    runtime, rules = rules_runtime
    before = ask(runtime, "Does my platinum membership give me free shipping?", session="rules-a")
    assert rules_decision(before) == "no rule matched"
    assert not threshold_decision(before).startswith("llm"), before.reasons  # an in-scope question stays small
    assert not any(r.startswith("rule:") for r in before.reasons)

    add_rule(rules, PLATINUM_RULE)
    after = ask(runtime, "With a platinum membership, is express delivery included?", session="rules-b")
    assert after.route != "cache", after.reasons
    assert rules_decision(after) == "rule 'platinum-members' -> llm"
    assert threshold_decision(after) == "llm (rule)"
    assert "rule: platinum-members -> llm" in after.reasons
    assert runtime.rules.problem == "" and runtime.status()["problems"] == []


def test_a_broken_rules_edit_keeps_the_last_good_rules_and_is_reported(rules_runtime):
    runtime, rules = rules_runtime
    add_rule(rules, PLATINUM_RULE)
    assert "rule: platinum-members -> llm" in ask(runtime, "platinum membership perks?", session="r1").reasons
    add_rule(rules, "  - name: typo\n    keywords: [gift card]\n    route: nowhere\n")
    kept = ask(runtime, "is the platinum membership worth it for furniture?", session="r2")
    assert "rule: platinum-members -> llm" in kept.reasons  # the last good rules still route
    problem = runtime.status()["problems"]
    assert len(problem) == 1 and "route must be one of" in problem[0] and str(rules) in problem[0]


# --- 3. feedback -> retrained router -> promotion -> rollback ------------------------------------
def in_scope_questions(n: int) -> list[str]:
    """Demo questions, one per answer, without order numbers (those go to the order tool)."""
    seen, out = set(), []
    with (DEMO / "questions.csv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["answer_id"] in seen or "NW-" in row["query"]:
                continue
            seen.add(row["answer_id"])
            out.append(row["query"])
    assert len(out) >= n
    return out[:n]


def labelled_traffic(runtime) -> dict:
    """Real requests through the service, then what customers and agents said about them:
    8 thumbs-down, 4 hand-offs, 6 thumbs-up on small answers, and a thumbs-down on a guard refusal."""
    questions = in_scope_questions(18)
    responses = [ask(runtime, q, user=f"cust-{i}", session=f"fb-{i}") for i, q in enumerate(questions)]
    asked = dict(zip([r.request_id for r in responses], questions))
    assert [r.route for r in responses] == ["small"] * len(responses), [(r.route, r.reasons) for r in responses]
    down, handed, up = responses[:8], responses[8:12], responses[12:]
    for response in down:
        runtime.service.feedback(response.request_id, -1, "did not answer my question")
    for i, response in enumerate(handed):
        runtime.service.handoff(response.session_id, f"cust-{8 + i}", response.request_id, "wants a person")
    for response in up:
        runtime.service.feedback(response.request_id, 1)
    guard = ask(runtime, "   ", session="fb-guard")
    assert guard.route == "guard"
    runtime.service.feedback(guard.request_id, -1)
    return {"down": down, "handed": handed, "up": up, "guard": guard, "asked": asked}


@pytest.fixture
def feedback_db(tmp_path):
    from offline.router_training import TABLE

    deadline = time.monotonic() + 40 * 60
    while not TABLE.exists():  # written by `tandem router train`; retraining needs it
        if time.monotonic() > deadline:
            pytest.fail(f"{TABLE} is missing: run `tandem router train` once")
        time.sleep(60)
    return fresh_db(tmp_path)


def test_feedback_retrains_a_router_that_is_promoted_followed_by_a_runtime_and_rolled_back(
        settings, demo_kb, feedback_db, tmp_path):
    from chains.routers.artifacts import candidate_path, live, rollback
    from chains.routers.evidence import EVIDENCE_NAMES
    from core.errors import TandemError
    from offline.router_feedback import logged_examples, promote_if_not_worse, retrain_from_feedback

    traffic_runtime = make_runtime(settings, feedback_db, demo_kb)
    follower = make_runtime(settings, feedback_db, demo_kb)  # another replica on the same database, cold cache
    follower.routers.check_s = 0.0  # skip the 2 s poll interval
    labelled = labelled_traffic(traffic_runtime)

    # Step 1: the feedback becomes labels (thumbs-down and hand-off: the LLM was needed; thumbs-up: it was not).
    examples, ids = logged_examples(feedback_db)
    expected = {r.request_id: 1 for r in labelled["down"] + labelled["handed"]}
    expected |= {r.request_id: 0 for r in labelled["up"]}
    assert dict(zip(ids, examples["needs_llm"].tolist())) == expected  # the guard refusal is not a router example
    first = labelled["down"][0]
    row = examples["x_route"][ids.index(first.request_id)]
    assert row[:len(EVIDENCE_NAMES)].tolist() == pytest.approx([first.scores[n] for n in EVIDENCE_NAMES], abs=1e-6)

    # Step 2: a candidate, compared in shadow with the live (shipped) router on the held-out 30 %.
    home = tmp_path / "home"
    log: list[str] = []
    path, metrics = retrain_from_feedback(feedback_db, home, log=log.append)
    held_out = len(ids) - int(round(len(ids) * 0.7))
    assert path == candidate_path(home) and path.exists()
    shadow = metrics["shadow"]
    assert shadow["rows"] == held_out > 0
    assert shadow["live"]["log_loss"] > 0 and shadow["candidate"]["log_loss"] > 0
    assert shadow["not_worse"] is True, shadow  # trained on this kind of feedback: not worse on more of it
    assert json.loads(path.read_text())["feedback_rows"] == len(ids) - held_out
    assert any(f"retraining with {len(ids) - held_out} labelled requests" in line for line in log)
    # Per group, out of fold: the share escalated at τ splits into its in-scope and needs-the-LLM parts.
    dev = metrics["per_group"]["bitext-dev"]
    in_scope = dev["rows"] - dev["needs_llm"]
    assert in_scope > 0 and dev["needs_llm"] > 0 and 0 <= dev["in_scope_to_llm"] < dev["needs_llm_to_llm"] <= 1
    assert dev["llm_share_at_tau"] * dev["rows"] == pytest.approx(
        dev["in_scope_to_llm"] * in_scope + dev["needs_llm_to_llm"] * dev["needs_llm"], abs=0.1)

    # Step 3: a candidate whose shadow comparison says "worse" is refused and nothing changes ...
    worse = json.loads(path.read_text())
    worse["evidence"]["metrics"]["shadow"]["not_worse"] = False
    worse_path = tmp_path / "worse.json"
    worse_path.write_text(json.dumps(worse))
    with pytest.raises(TandemError, match="worse than the live one"):
        promote_if_not_worse(feedback_db, worse_path, "test")
    assert live(feedback_db).version == 0
    # ... and the one that is not worse goes live.
    version = promote_if_not_worse(feedback_db, path, "test")
    assert version > 0 and live(feedback_db).version == version
    assert "retrained from feedback" in live(feedback_db).source

    # Step 4: a running runtime follows the promotion, and its router learned from the thumbs-down.
    asked = labelled["down"][1]
    promoted = ask(follower, labelled["asked"][asked.request_id], session="follow-1")
    assert follower.routers.version == version and follower.status()["router_version"] == version
    assert promoted.scores["p_llm"] > asked.scores["p_llm"], (promoted.scores, asked.scores)

    # Step 5: rollback restores the shipped router (version 0) in the running runtime too.
    restored = rollback(feedback_db, "test")
    assert restored.version == 0 and restored.source == "shipped"
    again = labelled["down"][2]
    shipped = ask(follower, labelled["asked"][again.request_id], session="follow-2")
    assert follower.routers.version == 0
    assert shipped.scores["p_llm"] == pytest.approx(again.scores["p_llm"], abs=1e-4)


# --- 4. the console's Retrain and Promote buttons --------------------------------------------------
@pytest.fixture
def console_on(monkeypatch, feedback_db, tmp_path):
    """The console's settings point at the test's database and data directory; restored afterwards."""
    from core.settings import reset_settings

    home = tmp_path / "console-home"
    monkeypatch.setenv("TANDEM_DATABASE_URL", feedback_db.url)
    monkeypatch.setenv("TANDEM_HOME", str(home))
    reset_settings()
    yield home
    monkeypatch.undo()
    reset_settings()


def test_the_consoles_promote_button_makes_the_retrained_router_live_for_a_running_runtime(
        settings, demo_kb, feedback_db, console_on):
    from chains.routers.artifacts import candidate_path, live
    from tests.console.conftest import new_app, sign_in

    runtime = make_runtime(settings, feedback_db, demo_kb)
    runtime.routers.check_s = 0.0
    labelled_traffic(runtime)
    assert runtime.status()["router_version"] == 0

    from console.accounts import add_operator

    add_operator(feedback_db, "opal", "opal-password")  # the promotion's author is the signed-in account
    at = new_app().run()
    sign_in(at, password="opal-password", operator="opal")
    assert not at.exception, at.exception
    at = at.switch_page("views/router_training.py").run()
    assert not at.exception, at.exception
    at.button(key="router_retrain").click().run(timeout=900)
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert candidate_path(console_on).exists()
    at.button(key="router_promote").click().run(timeout=120)
    assert not at.error, [e.value for e in at.error]
    success = [s.value for s in at.success]
    assert len(success) == 1 and success[0].startswith("Promoted as router v"), success
    version = int(success[0].split(" v", 1)[1].split(":", 1)[0])

    assert live(feedback_db).version == version and "promoted by opal" in live(feedback_db).source
    response = ask(runtime, "Do you gift-wrap presents if I add a note?", session="after-promote")
    assert any(step["stage"] == "score" for step in response.trace), response.reasons  # scored, not cached
    assert runtime.status()["router_version"] == version


# --- cached answers after an operator's change -----------------------------------------------------------------
def test_an_edited_rule_applies_to_a_message_asked_before_the_edit(rules_runtime):
    runtime, rules = rules_runtime
    message = "Does my platinum membership give me free shipping?"
    before = ask(runtime, message, session="same-a")
    assert rules_decision(before) == "no rule matched" and not threshold_decision(before).startswith("llm")
    add_rule(rules, PLATINUM_RULE)
    after = ask(runtime, message, session="same-b")
    assert after.route != "cache", after.reasons  # the cached answer was decided without the new rule
    assert threshold_decision(after) == "llm (rule)" and "rule: platinum-members -> llm" in after.reasons


def test_kb_ingest_from_another_process_replaces_the_running_runtimes_answer_and_cached_copy(
        settings, encoder, tmp_path):
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.demo_kb import DEMO_FILES

    home = tmp_path / "home"
    kb = ChromaKnowledgeBase(encoder, path=home / "chroma", collection=settings.kb_collection)
    kb.ingest(DEMO_FILES, progress=False)
    runtime = make_runtime(settings, fresh_db(tmp_path), kb)
    question = "How long does shipping take?"
    first, second = ask(runtime, question, session="kb-1"), ask(runtime, question, session="kb-2")
    assert first.route == "small" and first.sources[0].answer_id == "shipping_times"
    assert second.route == "cache" and second.answer == first.answer

    new_text = "Every order now leaves our warehouse within one hour and arrives in 2 business days."
    update = tmp_path / "shipping.csv"
    update.write_text("answer_id,title,category,answer,tags\n"
                      f'shipping_times,How long does shipping take?,shipping,"{new_text}",delivery time\n')
    result = run_cli("kb", "ingest", str(update), "--no-progress",
                     env={"TANDEM_HOME": str(home), "TANDEM_KB_COLLECTION": settings.kb_collection})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("ingested 1 answers, 0 questions; no bad rows")
    time.sleep(2.5)  # the KB checks the store for other writers at most every 2 s

    third = ask(runtime, question, session="kb-3")
    assert third.route != "cache", third.reasons  # the cached answer belongs to the old KB version
    assert new_text in third.answer and first.answer not in third.answer
    assert third.sources[0].answer_id == "shipping_times"
