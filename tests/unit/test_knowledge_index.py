"""The fusion and per-answer aggregation of HybridIndex, with hand-made unit vectors instead of MiniLM."""

import re

import numpy as np
import pytest

from knowledge.index import FusionParams, HybridIndex, best_first


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
    index = HybridIndex(texts, ["pw", "pw", "pw", "other"], vectors, FusionParams(lexical_weight=0.0, head_weight=0.0),
                        support=[True, True, True, False])
    scores = {r.answer_id: r.score for r in index.search("x", unit(1), k=2)}
    # 'other' has one non-support record: its score is its best cosine, not a mean with missing neighbours.
    assert abs(scores["other"] - float(unit(1) @ unit(1, 0.05))) < 1e-6


def _two_answer_index(head_weight: float) -> HybridIndex:
    vectors = np.stack([unit(1, 0, 0.6), unit(1, 0, -0.6), unit(1, 0.6, 0), unit(1, -0.6, 0),
                        unit(0, 1, 0), unit(0, 1, 0.3), unit(0, 1, -0.3), unit(0.2, 1, 0)])
    return HybridIndex([f"t{i}" for i in range(8)], ["track"] * 4 + ["delivery"] * 4, vectors,
                       FusionParams(lexical_weight=0.0, head_weight=head_weight, decay=0.0))


def test_answer_head_gives_most_probability_to_the_answer_whose_paraphrases_surround_the_message():
    index = _two_answer_index(0.2)
    centre_of_track, centre_of_delivery = index.answer_probabilities(unit(1)), index.answer_probabilities(unit(0, 1))
    assert set(centre_of_track) == {"track", "delivery"} and abs(sum(centre_of_track.values()) - 1) < 1e-5
    assert centre_of_track["track"] > 0.5 > centre_of_delivery["track"]


def test_answer_head_blend_stays_in_unit_range_and_weight_zero_is_the_plain_fusion():
    query = unit(1, 0.2, 0.1)
    plain = _two_answer_index(0.0)
    blended = _two_answer_index(0.2)
    assert plain.answer_probabilities(query) == {}
    best_cosine = float(max(plain.embeddings[:4] @ query))
    assert abs(plain.search("x", query, k=1)[0].score - best_cosine) < 1e-6  # decay 0: the best record's cosine
    head = blended.answer_probabilities(query)["track"]
    top = blended.search("x", query, k=1)[0]
    assert top.answer_id == "track" and 0.0 <= top.score <= 1.0
    assert abs(top.score - (best_cosine + 0.2 * head) / 1.2) < 1e-5


def test_answer_head_weighs_less_where_the_encoder_cannot_read_the_script():
    query, vector = "退货", unit(1, 1)  # Chinese in an English encoder's space: lexical weight 0.9, not 0.3
    blended, plain = make_index().search(query, vector, k=1)[0], make_index(head_weight=0.0).search(query, vector, k=1)[0]
    assert blended.answer_id == plain.answer_id == "zh_returns"
    shrunk = 0.2 * (1 - 0.9) / (1 - 0.3)
    head = make_index().answer_probabilities(vector)["zh_returns"]
    assert abs(blended.score - (plain.score + shrunk * head) / (1 + shrunk)) < 1e-5


def test_an_answer_and_its_translation_share_the_heads_probability_instead_of_splitting_it():
    # In a multilingual space an answer's English and Chinese records point the same way.
    vectors = np.stack([unit(1, 0.1), unit(1, -0.1), unit(1, 0.12), unit(1, -0.12), unit(0, 1), unit(0.1, 1)])
    answer_ids = ["refund", "refund", "refund_zh", "refund_zh", "shipping", "shipping"]
    families = ["refund", "refund", "refund", "refund", "shipping", "shipping"]
    split = HybridIndex([f"t{i}" for i in range(6)], answer_ids, vectors, FusionParams(lexical_weight=0.0))
    shared = HybridIndex([f"t{i}" for i in range(6)], answer_ids, vectors, FusionParams(lexical_weight=0.0),
                         families=families)
    probabilities = shared.answer_probabilities(unit(1))
    assert probabilities["refund"] == probabilities["refund_zh"] > 0.8
    assert split.answer_probabilities(unit(1))["refund"] < 0.6  # without families the two answers split it
    with pytest.raises(ValueError, match="families"):
        HybridIndex(["a", "b"], ["a", "b"], vectors[:2], FusionParams(), families=["a"])


def test_empty_index_returns_nothing():
    index = HybridIndex([], [], np.zeros((0, 384), dtype=np.float32))
    assert index.search("anything", unit(1)) == [] and len(index) == 0


@pytest.mark.parametrize(("field", "name", "other"), [("out_of_scope", "oos", "starter"),
                                                      ("starter", "starter", "oos")])
def test_out_of_scope_examples_are_evidence_never_hits(field, name, other):
    """The KB's own examples and Tandem's starter examples each give their own evidence, the other set's reads 0."""
    texts, answer_ids = ["How do I get a refund?", "Shipping takes three to five days."], ["refund", "shipping"]
    vectors = np.stack([unit(1, 0.1), unit(0, 1)])
    outside = np.stack([unit(0, 0, 1), unit(0, 0.2, 1)])  # e.g. "which laptop should I buy?"
    index = HybridIndex(texts, answer_ids, vectors, FusionParams(), **{field: outside})
    near_outside, near_refund = {}, {}
    hits = index.search("laptop advice", unit(0, 0.1, 1), k=5, evidence=near_outside)
    index.search("refund", unit(1, 0.1), k=5, evidence=near_refund)
    assert {h.answer_id for h in hits} == {"refund", "shipping"}
    assert near_outside[f"has_{name}"] == near_refund[f"has_{name}"] == 1.0
    assert near_outside[f"{name}_gap"] > 0 > near_refund[f"{name}_gap"]
    assert near_outside[f"{name}_knn"] == 0.5 and near_refund[f"{name}_knn"] == 0.5  # two of each kind among four
    assert (near_outside[f"has_{other}"], near_outside[f"{other}_gap"]) == (0.0, 0.0)


def test_without_out_of_scope_examples_their_evidence_reads_zero():
    evidence = {}
    make_index().search("refund", unit(1, 0.15), evidence=evidence)
    assert (evidence["has_oos"], evidence["oos_gap"], evidence["oos_knn"]) == (0.0, 0.0, 0.0)


def test_out_of_scope_vectors_of_another_width_are_refused():
    with pytest.raises(ValueError, match="width"):
        HybridIndex(["a"], ["a"], np.stack([unit(1)]), FusionParams(), out_of_scope=np.ones((1, 10), np.float32))


def test_every_starter_translation_says_row_for_row_what_the_english_file_says():
    """A KB keeps or leaves out a translated example with its English row (by index), so the rows must align."""
    import csv

    from knowledge.starter_examples import STARTER_FILE, TRANSLATIONS, starter_texts

    def categories(path):
        with path.open(encoding="utf-8", newline="") as handle:
            return [row["category"] for row in csv.DictReader(handle)]

    for language, path in TRANSLATIONS.items():
        assert categories(path) == categories(STARTER_FILE)
        assert len(starter_texts(language)) == len(starter_texts())
        assert all(re.search(r"[\u3400-\u9fff]", text) for text in starter_texts(language)), language


def test_a_starter_example_the_kb_answers_is_left_out():
    from knowledge.starter_examples import unanswered

    records = np.stack([unit(1, 0.1), unit(0, 1)])
    starter = np.stack([unit(1, 0.12), unit(0, 0, 1)])  # the first is all but one of the KB's own questions
    kept = unanswered(starter, records, cutoff=0.8)
    assert kept.tolist() == [False, True]
    assert unanswered(starter, records[:0]).tolist() == [True, True]  # an empty KB answers nothing


def test_best_first_orders_ties_by_record_whatever_numpy_partitions():
    # 300 records, many equal: a title that repeats a question word for word scores exactly as that question does,
    # and which comes first decides which records an answer's score averages.
    values = np.array([0.5] * 150 + [0.9, 0.7, 0.9] + [0.7] * 147, dtype=np.float32)
    assert best_first(values, 2).tolist() == [150, 152]
    assert best_first(values, 5).tolist() == [150, 152, 151, 153, 154]  # the tie at the cut: lowest records first
    assert best_first(values, 300)[:3].tolist() == [150, 152, 151] and len(best_first(values, 300)) == 300
    assert best_first(values[::-1].copy(), 2).tolist() == [147, 149]
