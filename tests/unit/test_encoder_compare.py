"""The arithmetic of offline/encoder_compare.py (issue 40): per-answer scores, fusion, the cascade, and the choice of
their parameters on development scores only, on small made-up matrices."""

from __future__ import annotations

import inspect

import numpy as np

from offline import encoder_compare
from offline.encoder_compare import answer_scores, cascaded, choose, fused, margins, top1


def test_answer_scores_take_the_nearest_question_or_the_mean_of_the_k_nearest():
    sims = np.array([[0.9, 0.1, 0.5, 0.6, 0.7]])
    labels = ["a", "a", "b", "b", "b"]
    assert answer_scores(sims, labels, ["a", "b"], k=1).tolist() == [[0.9, 0.7]]
    assert np.allclose(answer_scores(sims, labels, ["a", "b"], k=2), [[0.5, 0.65]])


def test_the_cascade_replaces_only_the_rows_whose_top_two_margin_is_below_the_margin():
    first = np.array([[0.9, 0.1], [0.52, 0.48]])
    second = np.array([[0.0, 1.0], [0.0, 1.0]])
    scores, escalated = cascaded(first, second, margin=0.1)
    assert escalated.tolist() == [False, True]
    assert scores.tolist() == [[0.9, 0.1], [0.0, 1.0]]
    assert np.allclose(margins(first), [0.8, 0.04])


def test_the_fusion_weight_is_minilms_share():
    assert fused(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), 0.25).tolist() == [[0.25, 0.75]]


def test_choose_escalates_the_unsure_messages_the_second_encoder_gets_right_and_keeps_the_escalation_cap():
    # Rows 0-1: MiniLM sure and right. Rows 2-3: MiniLM unsure (small margin) and wrong, mpnet right.
    minilm = np.array([[0.9, 0.1], [0.1, 0.9], [0.51, 0.49], [0.49, 0.51]])
    mpnet = np.array([[0.2, 0.8], [0.8, 0.2], [0.1, 0.9], [0.9, 0.1]])  # wrong where MiniLM is sure
    gold = np.array([0, 1, 1, 0])
    choice = choose(minilm, mpnet, gold, max_escalation=0.5)
    scores, escalated = cascaded(minilm, mpnet if choice.escalate_to == "mpnet" else fused(minilm, mpnet, choice.weight),
                                 choice.margin)
    assert escalated.tolist() == [False, False, True, True]
    assert top1(scores, gold) == choice.dev_cascade_top1 == 1.0
    capped = choose(minilm, mpnet, gold, max_escalation=0.25)
    assert capped.dev_escalation <= 0.25


def test_choose_never_names_the_held_out_set_and_the_comparison_calls_it_with_dev_scores():
    source = inspect.getsource(encoder_compare.choose)
    assert "heldout" not in source and "held_out" not in source
    combined = inspect.getsource(encoder_compare._combined_on_heldout)
    assert "choose(first.scores[\"dev\"]" in combined and "choose(first.scores[\"heldout" not in combined


def test_paired_counts_the_messages_each_side_alone_gets_right():
    from offline.encoder_compare import paired

    gold = np.array([0, 0, 1, 1])
    reference = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])  # right on rows 0-1
    other = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])  # right on rows 1-3
    result = paired(reference, other, gold)
    assert (result["gained"], result["lost"]) == (2, 1)
    assert 0.0 < result["p_value"] <= 1.0
