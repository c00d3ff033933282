"""The fusion and per-answer aggregation of HybridIndex, with hand-made unit vectors instead of MiniLM."""

import numpy as np
import pytest

from knowledge.index import FusionParams, HybridIndex


def unit(*weights: float) -> np.ndarray:
    v = np.zeros(384, dtype=np.float32)
    v[:len(weights)] = weights
    return v / np.linalg.norm(v)


def make_index(**params) -> HybridIndex:
    texts = ["How do I get a refund?", "refund please", "money back for my order",
             "Shipping takes three to five days.", "退货政策是什么"]
    answer_ids = ["refund", "refund", "refund", "shipping", "zh_returns"]
    vectors = np.stack([unit(1, 0.1), unit(1, 0.2), unit(1, 0.3), unit(0, 1), unit(0, 0, 1)])
    return HybridIndex(texts, answer_ids, vectors, FusionParams(**params))


def test_one_result_per_answer_best_first_with_scores_in_unit_range():
    index = make_index()
    results = index.search("refund", unit(1, 0.15), k=5)
    assert [r.answer_id for r in results] == ["refund", "shipping", "zh_returns"]
    assert all(0.0 <= r.score <= 1.0 for r in results)
    assert results[0].score > results[1].score >= results[2].score


def test_lexical_scores_are_normalised_and_zero_without_overlap():
    index = make_index()
    lexical = index.lexical_scores("refund please")
    assert lexical.max() <= 1.0 and lexical[1] == lexical.max() > 0.5
    assert lexical[3] == 0.0
    assert index.lexical_scores("zzqx").max() == 0.0


def test_typo_still_scores_lexically_through_character_ngrams():
    index = make_index()
    assert index.lexical_scores("refnud")[0] > 0.0
    assert make_index(ngram_weight=0.0).lexical_scores("refnud")[0] == 0.0


def test_chinese_query_matches_chinese_record_by_characters():
    index = make_index()
    results = index.search("退货", unit(1, 1), k=1)  # the vector points elsewhere; characters decide
    assert results[0].answer_id == "zh_returns"


def test_answers_without_example_questions_are_not_pulled_down_by_averaging():
    texts = ["reset password", "reset password now", "a weak paraphrase", "reset your password"]
    vectors = np.stack([unit(1), unit(1), unit(0.2, 1), unit(1, 0.05)])
    index = HybridIndex(texts, ["pw", "pw", "pw", "other"], vectors, FusionParams(lexical_weight=0.0),
                        support=[True, True, True, False])
    scores = {r.answer_id: r.score for r in index.search("x", unit(1), k=2)}
    # 'other' has one non-support record: its score is its best cosine, not a mean with missing neighbours.
    assert abs(scores["other"] - float(unit(1) @ unit(1, 0.05))) < 1e-6


def test_empty_index_returns_nothing():
    index = HybridIndex([], [], np.zeros((0, 384), dtype=np.float32))
    assert index.search("anything", unit(1)) == [] and len(index) == 0


def test_out_of_scope_examples_are_evidence_never_hits():
    texts, answer_ids = ["How do I get a refund?", "Shipping takes three to five days."], ["refund", "shipping"]
    vectors = np.stack([unit(1, 0.1), unit(0, 1)])
    outside = np.stack([unit(0, 0, 1), unit(0, 0.2, 1)])  # e.g. "which laptop should I buy?"
    index = HybridIndex(texts, answer_ids, vectors, FusionParams(), out_of_scope=outside)
    near_outside, near_refund = {}, {}
    hits = index.search("laptop advice", unit(0, 0.1, 1), k=5, evidence=near_outside)
    index.search("refund", unit(1, 0.1), k=5, evidence=near_refund)
    assert {h.answer_id for h in hits} == {"refund", "shipping"}
    assert near_outside["has_oos"] == near_refund["has_oos"] == 1.0
    assert near_outside["oos_gap"] > 0 > near_refund["oos_gap"]
    assert near_outside["oos_knn"] == 0.5 and near_refund["oos_knn"] == 0.5  # two of each kind among four


def test_without_out_of_scope_examples_their_evidence_reads_zero():
    evidence = {}
    make_index().search("refund", unit(1, 0.15), evidence=evidence)
    assert (evidence["has_oos"], evidence["oos_gap"], evidence["oos_knn"]) == (0.0, 0.0, 0.0)


def test_out_of_scope_vectors_of_another_width_are_refused():
    with pytest.raises(ValueError, match="width"):
        HybridIndex(["a"], ["a"], np.stack([unit(1)]), FusionParams(), out_of_scope=np.ones((1, 10), np.float32))
