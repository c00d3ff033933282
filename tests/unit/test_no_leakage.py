"""The hand-written held-out sets are for reporting only: none of their messages may appear in anything that trains,
tunes or chooses a threshold (dataset train/valid files, the development set, the demo KB, the starter
out-of-scope examples every KB gets, the router's stored
training rows' sources, the Chinese train/valid split).

The demo-shop set (knowledge/eval/demo_shop.csv) was written apart from the demo KB's stored questions: its held-out
split must not even come close (normalised text similarity) to its dev split, the stored questions or the answer titles.

The demo-shop sessions (knowledge/eval/demo_sessions.csv, issue 42) were written apart from the other sets, and its
held-out sessions must not come close to its dev sessions either.

Every held-out set (the Bitext held-out set, the demo-shop held-out split, the held-out demo-shop sessions, the Chinese
test split) must not come close
either to what Tandem writes and then fits or tunes on: the development sets, the starter examples, the demo KB's
questions, titles and answers in both languages, the Bitext FAQ's answers, tau-bench's train/dev requests and the
router's stored training rows of the hand-written and demo groups. The public datasets' own rows (train/valid files, and
their rows in the stored table) are checked for exact copies only: they cannot be rewritten, and short generic
requests ("what's your name") come close to one of their tens of thousands of rows by chance."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterable
from difflib import SequenceMatcher
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, REPO

EVAL = REPO / "knowledge" / "eval"
DEMO_SHOP = EVAL / "demo_shop.csv"
DEMO_KB = REPO / "knowledge" / "demo"
TRAINING_FILES = [EVAL / "bitext_dev.csv", REPO / "knowledge" / "demo" / "questions.csv",
                  REPO / "knowledge" / "demo" / "questions_zh.csv", REPO / "knowledge" / "demo" / "answers.csv",
                  REPO / "knowledge" / "starter" / "out_of_scope_en.csv",
                  REPO / "knowledge" / "starter" / "out_of_scope_zh.csv",
                  DATA / "bitext_cs_faq" / "train.csv", DATA / "clinc150" / "train.csv", DATA / "clinc150" / "valid.csv",
                  DATA / "banking77" / "train.csv", DATA / "hint3" / "train.csv"]


def normalised(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def texts_of(path: Path) -> set[str]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {normalised(row.get("query") or row.get("answer") or "") for row in rows} - {""}


def test_the_held_out_set_is_well_formed():
    with (EVAL / "bitext_heldout.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    in_scope = [r for r in rows if r["in_scope"] == "True"]
    assert len(in_scope) >= 200 and len(rows) - len(in_scope) >= 80
    assert len({r["answer_id"] for r in in_scope}) == 27  # every Bitext answer


@pytest.mark.parametrize("path", TRAINING_FILES, ids=lambda p: p.name if p.parent.name != "clinc150" else f"clinc-{p.name}")
def test_no_held_out_message_is_in_a_training_file(path):
    held_out = texts_of(EVAL / "bitext_heldout.csv")
    leaked = held_out & texts_of(path)
    assert not leaked, f"{len(leaked)} held-out messages appear in {path}: {sorted(leaked)[:5]}"


def test_no_held_out_or_test_chinese_message_is_used_to_fit():
    with (EVAL / "zh" / "paraphrases.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    fitted = {normalised(r["query"]) for r in rows if r["split"] in ("train", "valid")}
    test = {normalised(r["query"]) for r in rows if r["split"] == "test"}
    assert not fitted & test
    assert not test & texts_of(REPO / "knowledge" / "demo" / "questions_zh.csv")
    assert not test & texts_of(REPO / "knowledge" / "starter" / "out_of_scope_zh.csv")


def test_training_code_never_reads_the_held_out_or_test_sets():
    """The held-out reader is called by the evaluation only; training reads train/valid splits."""
    training = "".join((REPO / "offline" / name).read_text()
                       for name in ("router_training.py", "encoder_tuning.py", "recurring_threshold.py"))
    assert "bitext_heldout" not in training and "heldout" not in training
    assert '"test"' not in training and "('test'" not in training


# --- the demo-shop set --------------------------------------------------------------------------------
DEMO_SHOP_COLUMNS = ["query_id", "query", "answer_id", "in_scope", "style", "split"]
ANSWERABLE_STYLES = {"plain", "indirect", "typo", "two_clause", "entity", "terse", "polite", "angry"}
OUT_OF_SCOPE_KINDS = {"advice", "comparison", "other_domain", "chitchat", "multi_step", "complaint_judgement", "not_covered"}
NEAR_DUPLICATE = 0.8  # normalised-text similarity (difflib ratio) at or above which two messages count as near-duplicates


def demo_shop_rows() -> list[dict[str, str]]:
    with DEMO_SHOP.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def demo_answer_rows() -> list[dict[str, str]]:
    with (DEMO_KB / "answers.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def demo_shop_texts(split: str) -> set[str]:
    return {normalised(r["query"]) for r in demo_shop_rows() if r["split"] == split}


def english_demo_answer_ids() -> set[str]:
    return {r["answer_id"] for r in demo_answer_rows() if not r["answer_id"].startswith("zh_")}


def test_the_demo_shop_set_is_well_formed():
    with DEMO_SHOP.open(encoding="utf-8", newline="") as handle:
        assert next(csv.reader(handle)) == DEMO_SHOP_COLUMNS
    rows = demo_shop_rows()
    ids = [r["query_id"] for r in rows]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"demo-\d{4}", i) for i in ids)
    texts = [normalised(r["query"]) for r in rows]
    assert all(texts) and len(set(texts)) == len(texts), "empty or repeated messages"
    assert {r["split"] for r in rows} <= {"dev", "heldout"}
    assert {r["in_scope"] for r in rows} <= {"True", "False"}
    in_scope = [r for r in rows if r["in_scope"] == "True"]
    out_of_scope = [r for r in rows if r["in_scope"] == "False"]
    assert len(in_scope) >= 168 and len(out_of_scope) >= 48
    unknown = {r["answer_id"] for r in in_scope} - english_demo_answer_ids()
    assert not unknown, f"answer ids not in knowledge/demo/answers.csv: {sorted(unknown)}"
    assert all(r["answer_id"] == "" for r in out_of_scope)
    assert {r["style"] for r in in_scope} <= ANSWERABLE_STYLES
    assert {r["style"] for r in out_of_scope} <= OUT_OF_SCOPE_KINDS


def test_every_demo_answer_has_three_messages_and_one_in_each_split():
    rows = [r for r in demo_shop_rows() if r["in_scope"] == "True"]
    for answer_id in sorted(english_demo_answer_ids()):
        splits = [r["split"] for r in rows if r["answer_id"] == answer_id]
        assert len(splits) >= 3 and {"dev", "heldout"} <= set(splits), f"{answer_id}: {splits}"


def test_the_demo_shop_splits_are_about_even_in_and_out_of_scope():
    rows = demo_shop_rows()
    for in_scope in ("True", "False"):
        part = [r for r in rows if r["in_scope"] == in_scope]
        held_out = sum(r["split"] == "heldout" for r in part)
        assert 0.4 <= held_out / len(part) <= 0.6, f"in_scope={in_scope}: {held_out} of {len(part)} held out"


@pytest.mark.parametrize("path", TRAINING_FILES, ids=lambda p: p.name if p.parent.name != "clinc150" else f"clinc-{p.name}")
def test_no_demo_shop_held_out_message_is_in_a_training_file(path):
    leaked = demo_shop_texts("heldout") & texts_of(path)
    assert not leaked, f"{len(leaked)} demo-shop held-out messages appear in {path}: {sorted(leaked)[:5]}"


def test_no_demo_shop_held_out_message_is_in_its_dev_split():
    leaked = demo_shop_texts("heldout") & demo_shop_texts("dev")
    assert not leaked, f"{len(leaked)} demo-shop held-out messages are also in its dev split: {sorted(leaked)[:5]}"


def near_duplicates(texts: set[str], others: set[str], threshold: float) -> list[tuple[float, str, str]]:
    """(similarity, text, other) for every pair at or above threshold. difflib's ratio is 2*M/(len(a)+len(b)), so a
    pair whose lengths alone cap it below the threshold is skipped, then the cheap upper bounds before the full ratio."""
    found = []
    by_length = sorted(others, key=len)
    for text in texts:
        matcher = SequenceMatcher(None, b=text, autojunk=False)
        for other in by_length:
            shorter, longer = sorted((len(text), len(other)))
            if 2 * shorter < threshold * (shorter + longer):
                if len(other) > len(text):
                    break  # every later one is longer still
                continue
            matcher.set_seq1(other)
            if matcher.real_quick_ratio() >= threshold and matcher.quick_ratio() >= threshold \
                    and (ratio := matcher.ratio()) >= threshold:
                found.append((round(ratio, 3), text, other))
    return sorted(found, reverse=True)


def test_no_demo_shop_held_out_message_is_near_its_dev_split_the_stored_questions_or_the_answer_titles():
    others = (demo_shop_texts("dev") | texts_of(DEMO_KB / "questions.csv")
              | {normalised(r["title"]) for r in demo_answer_rows()}) - {""}
    close = near_duplicates(demo_shop_texts("heldout"), others, NEAR_DUPLICATE)
    assert not close, f"{len(close)} held-out messages are near-duplicates (similarity >= {NEAR_DUPLICATE}): {close[:5]}"


def test_the_near_duplicate_check_finds_a_typo_variant_and_passes_a_different_message():
    assert near_duplicates({normalised("how do i track my oder")}, {normalised("How do I track my order?")}, NEAR_DUPLICATE)
    assert not near_duplicates({normalised("Do you ship to Norway?")}, {normalised("How do I reset my password?")},
                               NEAR_DUPLICATE)


def test_the_near_duplicate_check_finds_the_issues_example_and_holds_at_its_threshold():
    pair = (normalised("how lng does shiping take"), normalised("How lond does shiping take?"))
    assert near_duplicates({pair[0]}, {pair[1], "track my order"}, NEAR_DUPLICATE) == [(0.941, *pair)]
    assert near_duplicates({"abcd"}, {"abce"}, 0.75) == [(0.75, "abcd", "abce")]  # 2 * 3 / 8, at the threshold
    assert not near_duplicates({"abcd"}, {"abce"}, 0.76)


def test_the_near_duplicate_check_finds_copies_shorter_and_longer_among_many_lengths():
    """The length bound skips pairs and stops early: a close pair on either side of the message's length is found."""
    others = {"x" * n for n in range(1, 60)} | {"where is my parcel", "where is my parcel now please"}
    found = near_duplicates({"where is my parcel now", "wher is my parcl"}, others, NEAR_DUPLICATE)
    assert {(text, other) for _, text, other in found} == {("where is my parcel now", "where is my parcel"),
                                                          ("where is my parcel now", "where is my parcel now please"),
                                                          ("wher is my parcl", "where is my parcel")}


# --- the demo-shop sessions (issue 42: predicted follow-ups) -------------------------------------------
DEMO_SESSIONS = EVAL / "demo_sessions.csv"
DEMO_SESSIONS_COLUMNS = ["session_id", "turn", "query", "answer_id", "in_scope", "split"]
SESSIONS_SEED = 42  # knowledge/eval/README.md: the sessions in writing order, shuffled with this seed, first half dev


def demo_session_rows() -> list[dict[str, str]]:
    with DEMO_SESSIONS.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def demo_session_texts(split: str | None = None) -> set[str]:
    return {normalised(r["query"]) for r in demo_session_rows() if split is None or r["split"] == split}


def sessions_by_id() -> dict[str, list[dict[str, str]]]:
    sessions: dict[str, list[dict[str, str]]] = {}
    for row in demo_session_rows():
        sessions.setdefault(row["session_id"], []).append(row)
    return sessions


def test_the_demo_sessions_set_is_well_formed():
    with DEMO_SESSIONS.open(encoding="utf-8", newline="") as handle:
        assert next(csv.reader(handle)) == DEMO_SESSIONS_COLUMNS
    rows, sessions = demo_session_rows(), sessions_by_id()
    assert len(sessions) >= 140 and len(rows) >= 550, f"{len(sessions)} sessions, {len(rows)} messages"
    assert all(re.fullmatch(r"sess-\d{3}", i) for i in sessions)
    for session_id, turns in sessions.items():
        assert [int(r["turn"]) for r in turns] == list(range(1, len(turns) + 1)), f"{session_id}: turns out of order"
        assert 3 <= len(turns) <= 6, f"{session_id}: {len(turns)} turns"
        assert len({r["split"] for r in turns}) == 1, f"{session_id}: split differs between its turns"
    assert {len(turns) for turns in sessions.values()} == {3, 4, 5, 6}
    assert {r["split"] for r in rows} == {"dev", "heldout"} and {r["in_scope"] for r in rows} == {"True", "False"}
    texts = [normalised(r["query"]) for r in rows]
    assert all(texts) and len(set(texts)) == len(texts), "empty or repeated messages"
    in_scope = [r for r in rows if r["in_scope"] == "True"]
    unknown = {r["answer_id"] for r in in_scope} - english_demo_answer_ids()
    assert not unknown, f"answer ids not in knowledge/demo/answers.csv: {sorted(unknown)}"
    assert all(r["answer_id"] == "" for r in rows if r["in_scope"] == "False")
    assert 0.15 <= 1 - len(in_scope) / len(rows) <= 0.2, "out-of-scope share outside 15-20 %"


def test_the_demo_sessions_split_is_the_seeded_shuffle_the_readme_describes():
    """The split was drawn, not chosen: the session ids shuffled with the seed, the first half dev."""
    import random

    sessions = sessions_by_id()
    order = sorted(sessions)
    random.Random(SESSIONS_SEED).shuffle(order)
    dev = set(order[:len(order) // 2])
    assert {i: turns[0]["split"] for i, turns in sessions.items()} == {
        i: "dev" if i in dev else "heldout" for i in sessions}


@pytest.mark.parametrize("path", TRAINING_FILES, ids=lambda p: p.name if p.parent.name != "clinc150" else f"clinc-{p.name}")
def test_no_demo_sessions_held_out_message_is_in_a_training_file(path):
    leaked = demo_session_texts("heldout") & texts_of(path)
    assert not leaked, f"{len(leaked)} held-out session messages appear in {path}: {sorted(leaked)[:5]}"


def test_no_demo_sessions_held_out_message_is_in_or_near_a_dev_session():
    held_out, dev = demo_session_texts("heldout"), demo_session_texts("dev")
    close = near_duplicates(held_out, dev, NEAR_DUPLICATE)
    assert not held_out & dev and not close, f"held-out session messages close to dev sessions: {close[:5]}"


def test_no_demo_session_message_is_near_the_other_hand_written_sets_or_the_demo_kb():
    """Written apart, dev sessions too: no message of either split is near a demo-shop message (either split), a stored
    question, an answer title or a Bitext dev or held-out message."""
    others = ({normalised(r["query"]) for r in demo_shop_rows()} | texts_of(DEMO_KB / "questions.csv")
              | {normalised(r["title"]) for r in demo_answer_rows()} | texts_of(EVAL / "bitext_dev.csv")
              | texts_of(EVAL / "bitext_heldout.csv")) - {""}
    close = near_duplicates(demo_session_texts(), others, NEAR_DUPLICATE)
    assert not close, f"{len(close)} session messages are near-duplicates of the other sets: {close[:5]}"


def test_the_followup_eval_fits_on_the_dev_sessions_only():
    """offline/followup_eval.py fits the follow-up model on what this reader returns for "dev"."""
    from offline.followup_eval import read_sessions

    texts = {normalised(m.text) for session in read_sessions("dev") for m in session}
    assert texts == demo_session_texts("dev") and not texts & demo_session_texts("heldout")


# --- the handoff-trigger set (issue 57: anger, legal threats, complaints about an answer) ------------------------
HANDOFF_TRIGGERS = EVAL / "handoff_triggers.csv"
HANDOFF_COLUMNS = ["message_id", "text", "previous", "language", "expected", "kind", "split"]
HANDOFF_REPORTED = ("test", "fresh")  # never tuned on: the rules' patterns were tuned on dev only
HANDOFF_EXPECTED = {"none", "anger", "legal", "complaint", "repeat", "asked"}


def handoff_trigger_rows() -> list[dict[str, str]]:
    with HANDOFF_TRIGGERS.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def handoff_trigger_texts(splits: Iterable[str]) -> set[str]:
    """The messages of those splits, and the earlier messages (``previous``) they are judged after, normalised."""
    rows = [r for r in handoff_trigger_rows() if r["split"] in splits]
    return {normalised(r[column]) for r in rows for column in ("text", "previous")} - {""}


def test_the_handoff_trigger_set_is_well_formed():
    with HANDOFF_TRIGGERS.open(encoding="utf-8", newline="") as handle:
        assert next(csv.reader(handle)) == HANDOFF_COLUMNS
    rows = handoff_trigger_rows()
    ids = [r["message_id"] for r in rows]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"ho-\d{3}", i) for i in ids)
    assert {r["expected"] for r in rows} <= HANDOFF_EXPECTED and {r["split"] for r in rows} == {"dev", *HANDOFF_REPORTED}
    assert {r["language"] for r in rows} == {"en", "zh"}
    person = [r for r in rows if r["expected"] != "none"]
    assert len(person) >= 60 and len(rows) - len(person) >= 120, (len(person), len(rows) - len(person))
    english = sum(r["language"] == "en" for r in rows)
    assert 1.6 <= english / (len(rows) - english) <= 2.6, "not about 2:1 English to Chinese"
    assert all(bool(r["previous"]) == (r["kind"] in ("repeat", "repeat_fine")) for r in rows)
    texts = [(normalised(r["text"]), normalised(r["previous"])) for r in rows]
    assert all(t for t, _ in texts) and len(set(texts)) == len(texts), "empty or repeated messages"


def test_no_handoff_trigger_test_or_fresh_message_is_in_or_near_its_dev_split():
    reported, dev = handoff_trigger_texts(HANDOFF_REPORTED), handoff_trigger_texts(("dev",))
    close = near_duplicates(reported, dev, NEAR_DUPLICATE)
    assert not reported & dev and not close, f"test/fresh messages close to the dev split: {close[:5]}"


def test_no_handoff_trigger_test_or_fresh_message_is_near_the_rules_or_the_tests_that_pin_them():
    """The patterns and the tests that pin them were written from dev: no reported message is quoted in the rules'
    comments or in those tests."""
    written = [REPO / "chains" / "rules.yaml", REPO / "tests" / "handoff" / "test_word_triggers.py",
               REPO / "tests" / "unit" / "test_chain_parts.py", REPO / "tests" / "handoff" / "test_triggers.py"]
    quoted = {normalised(q) for path in written for q in re.findall(r'"([^"\n]{8,})"', path.read_text(encoding="utf-8"))}
    close = near_duplicates(handoff_trigger_texts(HANDOFF_REPORTED), quoted - {""}, NEAR_DUPLICATE)
    assert not close, f"test/fresh messages quoted in the rules or their tests: {close[:5]}"


# --- near-copies of any held-out message in what Tandem writes and fits or tunes on ------------------------------
TABLE = REPO / "chains" / "artifacts" / "router_training.npz"
# The stored table's groups whose messages Tandem wrote (or whose KB is the demo shop's): near-copies checked. The
# other groups are public datasets' rows (CLINC150, Banking77, Bitext train, HINT3): exact copies checked.
WRITTEN_TABLE_GROUPS = ("bitext-dev", "zh", "tau+demo")
# Held-out messages close to the demo shop's own FAQ (a stored question or an answer title; the product's content,
# not a set written to be fitted on). The Bitext held-out set is never scored against the demo KB; the Chinese test
# split is (its mixed-language messages quote a stored English question). Reported on issue 40 for a decision:
# rewrite the held-out message or the KB's question. Any other close pair fails, and so does an entry here that no
# longer occurs.
KNOWN_DEMO_KB_PAIRS = {
    # (held-out or test message, demo KB text), both normalised
    ("how lng does shiping take", "how long does shipping take"),
    ("what s your refund policy", "what is your return policy"),
    ("i forgt my pasword", "i forgot my password"),
    ("forgot my password", "i forgot my password"),
    ("what s the minimum spend for free shipping", "what s the minimum order for free shipping"),
    ("how many business days for standard shipping", "how many days for standard shipping"),
    ("express shipping", "express shipping price"),
    ("if i order today when would it arrive in leeds", "if i order today when will it arrive"),
    ("有哪些 payment options", "payment options"),
    ("student discount 是打几折", "student discount"),
    ("怎么 sign up", "sign up"),
    ("可以 refund 到 gift card 吗", "refund as gift card"),
}


def column_texts(path: Path, *columns: str, splits: Iterable[str] | None = None) -> set[str]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if splits is None or r.get("split") in splits]
    return {normalised(r[column]) for r in rows for column in columns} - {""}


def held_out_sets() -> dict[str, set[str]]:
    return {"Bitext held-out": texts_of(EVAL / "bitext_heldout.csv"), "demo-shop held-out": demo_shop_texts("heldout"),
            "demo-shop sessions held-out": demo_session_texts("heldout"),
            "Chinese test": column_texts(EVAL / "zh" / "paraphrases.csv", "query", splits=("test",)),
            "handoff-trigger test and fresh": handoff_trigger_texts(HANDOFF_REPORTED)}


def stored_table() -> tuple[list[str], list[str]]:
    """The router's stored training rows: (text, group) columns."""
    with np.load(TABLE, allow_pickle=False) as table:
        return [str(t) for t in table["text"]], [str(g) for g in table["group"]]


def tau_bench_requests() -> set[str]:
    with (DATA / "tau_bench_hard_requests" / "tasks.jsonl").open(encoding="utf-8") as handle:
        tasks = [json.loads(line) for line in handle if line.strip()]
    return {normalised(t["instruction"]) for t in tasks if t["split"] in ("train", "dev")}


def written_table_rows() -> set[str]:
    texts, groups = stored_table()
    return {normalised(t) for t, g in zip(texts, groups) if g in WRITTEN_TABLE_GROUPS}


# What Tandem writes (or takes whole from tau-bench and the Bitext FAQ) and fits or tunes on, normalised.
WRITTEN_INPUTS: dict[str, Callable[[], set[str]]] = {
    "bitext_dev.csv": lambda: texts_of(EVAL / "bitext_dev.csv"),
    "demo_shop.csv dev split": lambda: demo_shop_texts("dev"),
    "demo_sessions.csv dev sessions": lambda: demo_session_texts("dev"),
    "handoff_triggers.csv dev split": lambda: handoff_trigger_texts(("dev",)),
    "zh/paraphrases.csv train and valid": lambda: column_texts(EVAL / "zh" / "paraphrases.csv", "query",
                                                               splits=("train", "valid")),
    "out_of_scope_en.csv": lambda: texts_of(REPO / "knowledge" / "starter" / "out_of_scope_en.csv"),
    "out_of_scope_zh.csv": lambda: texts_of(REPO / "knowledge" / "starter" / "out_of_scope_zh.csv"),
    "demo questions.csv": lambda: texts_of(DEMO_KB / "questions.csv"),
    "demo questions_zh.csv": lambda: texts_of(DEMO_KB / "questions_zh.csv"),
    "demo answers.csv titles and answers": lambda: column_texts(DEMO_KB / "answers.csv", "title", "answer"),
    "demo answers_zh.csv titles and answers": lambda: column_texts(DEMO_KB / "answers_zh.csv", "title", "answer"),
    "Bitext kb_answers.csv": lambda: column_texts(DATA / "bitext_cs_faq" / "kb_answers.csv", "answer"),
    "tau-bench train and dev": tau_bench_requests,
    "router_training.npz written groups": written_table_rows,
}


def close_pairs(held_out: set[str], others: set[str], known: set[tuple[str, str]]) -> list[tuple[float, str, str]]:
    """Near-duplicate (held-out, other) pairs that are not among the known ones."""
    return [pair for pair in near_duplicates(held_out, others, NEAR_DUPLICATE) if pair[1:] not in known]


def test_close_pairs_reports_a_planted_near_copy_and_only_the_unknown_ones():
    held_out = {normalised("how lng does shiping take"), normalised("Do you ship to Norway?")}
    planted = {normalised("how lond does shiping take"), normalised("How do I reset my password?")}
    assert close_pairs(held_out, planted, set()) == [(0.941, "how lng does shiping take", "how lond does shiping take")]
    assert close_pairs(held_out, planted, {("how lng does shiping take", "how lond does shiping take")}) == []
    assert close_pairs(held_out, {normalised("do you ship to norway")}, set()) == [
        (1.0, "do you ship to norway", "do you ship to norway")]  # an exact copy is a near-copy too


@pytest.fixture(scope="module")
def held_out() -> set[str]:
    return set().union(*held_out_sets().values())


@pytest.mark.parametrize("name", list(WRITTEN_INPUTS))
def test_no_held_out_or_test_message_is_near_a_fitted_input_but_the_known_demo_kb_pairs(name, held_out):
    close = close_pairs(held_out, WRITTEN_INPUTS[name](), KNOWN_DEMO_KB_PAIRS)
    assert not close, (f"{len(close)} held-out/test messages are near-duplicates (similarity >= {NEAR_DUPLICATE}) "
                       f"of {name}: {close[:5]}")


def test_every_known_demo_kb_pair_still_occurs(held_out):
    kb = WRITTEN_INPUTS["demo questions.csv"]() | WRITTEN_INPUTS["demo answers.csv titles and answers"]()
    found = {pair[1:] for pair in near_duplicates(held_out, kb, NEAR_DUPLICATE)}
    assert not KNOWN_DEMO_KB_PAIRS - found, f"no longer close, drop them: {sorted(KNOWN_DEMO_KB_PAIRS - found)}"


def test_no_held_out_or_test_message_is_a_stored_training_row(held_out):
    texts, _ = stored_table()
    copied = sorted({normalised(t) for t in texts} & held_out)
    assert len(texts) > 1000 and not copied, f"held-out/test messages among the stored training rows: {copied[:5]}"


def test_the_demo_shop_dev_reader_reads_the_dev_split_only():
    """offline/recurring_threshold.py chooses a threshold on it: no held-out message may come through."""
    from offline.datasets import demo_shop_dev

    texts = {normalised(q.text) for q in demo_shop_dev()}
    assert texts == demo_shop_texts("dev") and not texts & demo_shop_texts("heldout")
