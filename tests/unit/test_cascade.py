"""The cascade's fusion (knowledge.cascade): an unsure primary search re-scored with a stronger encoder's."""

from __future__ import annotations

import pytest

from knowledge.cascade import Cascade, CascadeParams, fuse
from knowledge.index import AnswerScore


def scores(*pairs: tuple[str, float]) -> list[AnswerScore]:
    return [AnswerScore(answer_id, score, record, score, 0.0) for record, (answer_id, score) in enumerate(pairs)]


def test_fuse_blends_each_answers_two_scores_by_the_weight_and_ranks_by_the_blend():
    primary = scores(("refund", 0.80), ("return", 0.78), ("shipping", 0.50))
    refined = scores(("return", 0.90), ("refund", 0.60), ("shipping", 0.40))
    fused = fuse(primary, refined, weight=0.25)
    assert [s.answer_id for s in fused] == ["return", "refund", "shipping"]
    assert fused[0].score == pytest.approx(0.25 * 0.78 + 0.75 * 0.90)
    assert fused[1].score == pytest.approx(0.25 * 0.80 + 0.75 * 0.60)
    assert fused[0].record == 1 and fused[0].dense == pytest.approx(0.78)  # the primary's record and parts stay


def test_an_answer_one_space_missed_reads_that_spaces_lowest_score():
    primary = scores(("refund", 0.80), ("return", 0.78))
    refined = scores(("warranty", 0.95), ("refund", 0.50))
    fused = {s.answer_id: s.score for s in fuse(primary, refined, weight=0.5)}
    assert fused["warranty"] == pytest.approx(0.5 * 0.78 + 0.5 * 0.95)  # primary's floor: its last score
    assert fused["return"] == pytest.approx(0.5 * 0.78 + 0.5 * 0.50)  # refined's floor: its last score


def test_weight_one_keeps_the_primary_order_and_an_empty_refined_list_changes_nothing():
    primary = scores(("refund", 0.80), ("return", 0.78))
    refined = scores(("return", 0.99), ("refund", 0.10))
    assert [s.answer_id for s in fuse(primary, refined, weight=1.0)] == ["refund", "return"]
    assert fuse(primary, [], weight=0.3) == primary


def test_only_a_top_two_gap_under_the_margin_is_unsure():
    cascade = Cascade(encoder=None, index=None, params=CascadeParams(margin=0.05, weight=0.4))  # type: ignore[arg-type]
    assert cascade.unsure("where is my parcel", scores(("a", 0.70), ("b", 0.66)))
    assert not cascade.unsure("where is my parcel", scores(("a", 0.70), ("b", 0.64)))
    assert not cascade.unsure("where is my parcel", scores(("a", 0.70)))


def test_a_top_answer_under_the_floor_is_out_of_scope_whatever_its_margin_and_is_not_escalated():
    cascade = Cascade(encoder=None, index=None, params=CascadeParams(margin=0.05, floor=0.3))  # type: ignore[arg-type]
    assert not cascade.unsure("where is my parcel", scores(("a", 0.29), ("b", 0.28)))
    assert cascade.unsure("where is my parcel", scores(("a", 0.31), ("b", 0.30)))


def test_a_message_over_the_word_cap_is_not_escalated_however_close_its_answers():
    cascade = Cascade(encoder=None, index=None, params=CascadeParams(margin=0.05, max_words=5))  # type: ignore[arg-type]
    close = scores(("a", 0.70), ("b", 0.69))
    assert cascade.unsure("where is my parcel now", close)  # 5 words
    assert not cascade.unsure("where is my parcel right now", close)  # 6 words
    uncapped = Cascade(encoder=None, index=None, params=CascadeParams(margin=0.05, max_words=0))  # type: ignore[arg-type]
    assert uncapped.unsure(" ".join(["word"] * 200), close)
