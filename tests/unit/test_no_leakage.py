"""The hand-written held-out set is for reporting only: none of its messages may appear in anything that trains,
tunes or chooses a threshold (dataset train/valid files, the development set, the demo KB, the starter
out-of-scope examples every KB gets, the router's stored
training rows' sources, the Chinese train/valid split)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from tests.conftest import DATA, REPO

EVAL = REPO / "knowledge" / "eval"
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
    training = (REPO / "offline" / "router_training.py").read_text() + (REPO / "offline" / "encoder_tuning.py").read_text()
    assert "bitext_heldout" not in training and '"test"' not in training and "('test'" not in training
