"""Draft quality means the same on every KB: each KB's floor comes from its own stored questions searched without
their own record (chains/calibration.py), and the threshold stage rewrites only below the lower of the operator's
threshold and that floor."""

from __future__ import annotations

import csv
from collections import Counter

import numpy as np
import pytest

from chains.calibration import MIN_RIGHT_DRAFTS, RIGHT_DRAFTS_REWRITTEN, quality_floors
from chains.routers import fixed_router
from chains.schema import ChatRequest
from core.policy import Thresholds
from core.settings import get_settings
from core.text import has_cjk
from knowledge.demo_kb import DEMO_DIR
from offline.route_batch import batch_chain

pytestmark = pytest.mark.slow


def test_a_left_out_search_never_finds_the_question_itself(demo_kb):
    searches = demo_kb.left_out_searches(per_space=60)
    assert len(searches) == 60
    stored = Counter(row["query"] for name in ("questions.csv", "questions_zh.csv")
                     for row in csv.DictReader((DEMO_DIR / name).open(encoding="utf-8")))
    stored.update(row["title"] for name in ("answers.csv", "answers_zh.csv")
                  for row in csv.DictReader((DEMO_DIR / name).open(encoding="utf-8")))
    once = [(q, hits, evidence) for q, _answer, hits, evidence in searches if stored[q] == 1]
    assert len(once) >= 50  # a question stored twice (also an answer's title) may still meet its twin
    for question, hits, evidence in once:
        assert all(h.matched_text != question for h in hits), question
        # MiniLM reads no Chinese: two Chinese questions can share a vector; an English one meets only paraphrases
        assert has_cjk(question) or evidence["dense_top"] < 0.9999, question


def test_the_demo_kb_gets_a_floor_from_its_right_left_out_drafts(demo_kb, settings):
    router = fixed_router(settings.router)
    floors = quality_floors(demo_kb, router)
    floor = floors["en"]
    assert floor.right_drafts >= MIN_RIGHT_DRAFTS and floor.searched >= floor.right_drafts
    # By construction: about RIGHT_DRAFTS_REWRITTEN of the right left-out drafts score below the floor.
    from chains import answers
    from chains.routers.base import RouteContext

    qualities = [router.draft_quality(RouteContext(hits=hits, evidence=evidence),
                                      answers.draft_answer(question, hits).coverage)
                 for question, answer, hits, evidence in demo_kb.left_out_searches()
                 if hits and hits[0].answer_id == answer and not has_cjk(question)]
    assert np.mean(np.array(qualities) < floor.value) <= RIGHT_DRAFTS_REWRITTEN + 1 / len(qualities)
    assert 0 < floor.value < 1


def test_the_threshold_stage_uses_the_lower_of_the_operators_threshold_and_the_floor(demo_kb):
    chain = batch_chain(demo_kb)
    floor = chain.quality_floors()["en"].value
    defaults = Thresholds.defaults(get_settings())
    for operator_threshold in (min(1.0, floor + 0.2), 0.0):  # an operator's threshold above the floor, and below it
        thresholds = defaults.model_copy(update={"rewrite_threshold": operator_threshold})
        turn = chain.route_only.invoke(chain_turn("can i swap the size on my order", thresholds))
        step = next(s for s in turn.trace if s["stage"] == "threshold")
        assert step["detail"]["kb_rewrite_floor"] == min(floor, operator_threshold)
        if turn.scores["p_llm"] < defaults.route_threshold:
            assert (turn.plan == "rewrite") == (turn.scores["draft_quality"] < min(floor, operator_threshold))


def chain_turn(text: str, thresholds: Thresholds):
    from chains.turn import Turn

    return Turn(request=ChatRequest(message=text, channel="batch"), thresholds=thresholds)
