"""Advice on products: the candidates an advice message gets, and the claims check of what an answer says about them
(catalog/claims.py, the interface chains/verify.py reaches the catalog through). Real parts: the shared test feed
ingested with MiniLM into a real Chroma store and SQLite."""

from __future__ import annotations

import pytest

from catalog.advice import advice
from catalog.search import ProductSearch
from chains.verify import defects
from tests.catalog.shop import open_catalog, write_feed

FAMILY = "Which kettle would you recommend for a family of five?"


@pytest.fixture(scope="module")
def search(encoder, tmp_path_factory):
    folder = tmp_path_factory.mktemp("claims")
    catalog = open_catalog(folder, encoder)
    catalog.ingest(write_feed(folder / "feed.tsv"))
    return ProductSearch(catalog)


@pytest.fixture(scope="module")
def kettles(search):
    found = advice(search, FAMILY)
    assert found is not None
    return found


def test_an_advice_message_gets_the_kind_it_names_as_candidates_with_their_records(kettles):
    assert [p.id for p in kettles.products] == ["K1", "K2"]
    assert [c["id"] for c in kettles.cards] == ["K1", "K2"]
    context = kettles.context()
    assert "Family Electric Kettle 2.2 L: price $59.90; in stock" in context
    assert "capacity 2.2 L" in context and "material Stainless steel" in context


def test_a_budget_alone_picks_candidates_of_every_kind_within_it(search):
    gifts = advice(search, "any gift ideas under $30?")
    assert gifts is not None and gifts.products
    assert all(p.effective_price <= 30 for p in gifts.products)
    assert [c["field"] for c in gifts.chips] == ["price"]


@pytest.mark.parametrize("message", ["which is best for my order delivery?",   # about an order: not products
                                     "what would you recommend for a rainy day?",  # no kind, product or budget
                                     "a blue throw blanket under $50"])  # no advice asked: the catalog's search
def test_no_candidates_for_a_message_that_is_not_advice_on_products(search, message):
    assert advice(search, message) is None


def test_an_invented_product_name_is_a_finding(kettles):
    found = kettles.claims.unmatched("For a family of five I recommend the Lavender Kettle.")
    assert [(c.kind, c.text) for c in found] == [("product", "Lavender Kettle")]


def test_a_wrong_price_is_a_finding(kettles):
    found = kettles.claims.unmatched("The Family Electric Kettle 2.2 L costs $49.90.")
    assert [(c.kind, c.text) for c in found] == [("price", "$49.90")]


def test_a_price_of_another_candidate_said_of_this_one_is_a_finding(kettles):
    found = kettles.claims.unmatched("The Family Electric Kettle 2.2 L is only $24.90.")
    assert [(c.kind, c.text) for c in found] == [("price", "$24.90")]


def test_a_wrong_material_is_a_finding(kettles):
    found = kettles.claims.unmatched("The Family Electric Kettle 2.2 L is made of glass.")
    assert [(c.kind, c.text) for c in found] == [("attribute", "glass")]


def test_a_wrong_capacity_is_a_finding(kettles):
    found = kettles.claims.unmatched("The Travel Kettle holds 2.2 litres.")
    assert [(c.kind, c.text) for c in found] == [("attribute", "2.2 litres")]


def test_claims_that_match_the_records_pass(kettles):
    answer = ("For a family of five, the Family Electric Kettle 2.2 L is the better fit: it holds 2.2 L, has 3000 W, "
              "is stainless steel and costs $59.90. The Travel Kettle 0.8 L ($24.90) is plastic and not made of "
              "glass. Both are in stock.")
    assert kettles.claims.unmatched(answer) == []


def test_a_budget_the_customer_named_may_be_said_back(search):
    gifts = advice(search, "a gift under $30 for my sister, what do you suggest?")
    assert gifts is not None
    assert gifts.claims.unmatched("Within your $30 budget, the Quick-Dry Microfibre Towel costs $16.90.") == []


def test_a_chinese_price_that_is_no_record_is_a_finding(search):
    blankets = advice(search, "推荐一款两百元以内的毯子")
    assert blankets is not None and {p.id for p in blankets.products} <= {"B1", "B3", "B4"}
    assert [c.kind for c in blankets.claims.unmatched("纯棉盖毯只要15元。")] == ["price"]
    assert blankets.claims.unmatched("纯棉盖毯是纯棉的，价格39.90美元。") == []


def test_the_answer_check_reports_an_unmatched_product_claim_as_a_defect(kettles):
    found = defects("I recommend the Lavender Kettle for $59.90.", message=FAMILY, products=kettles.claims)
    assert [d.kind for d in found] == ["product_claim"] and "Lavender Kettle" in found[0].detail
    assert defects("I recommend the Family Electric Kettle 2.2 L for $59.90.", message=FAMILY,
                   products=kettles.claims) == []


def test_a_yes_no_question_said_back_as_its_answer_is_a_judgement_finding(search):
    wool = advice(search, "is the wool blanket good for sensitive skin?")
    assert wool is not None and "B3" in {p.id for p in wool.products}
    found = wool.claims.unmatched("The wool blanket is good for sensitive skin.")
    assert [c.kind for c in found] == ["judgement"]
    # What the record says, or an honest "it does not say", is no judgement
    assert wool.claims.unmatched("The Merino Wool Throw is 100% merino wool, warm and light.") == []
    assert wool.claims.unmatched("Its record does not say whether it suits sensitive skin.") == []
    found = defects("The wool blanket is good for sensitive skin.", message="is the wool blanket good for sensitive "
                    "skin?", products=wool.claims)
    assert "product_claim" in [d.kind for d in found]


def test_a_question_that_is_not_yes_or_no_lets_a_recommendation_use_the_customers_words(kettles):
    assert kettles.claims.unmatched("For a family of five, the Family Electric Kettle 2.2 L.") == []


def test_a_chinese_yes_no_question_said_back_is_a_judgement_finding(search):
    wool = advice(search, "羊毛毯适合敏感肌肤吗？")
    assert wool is not None
    assert [c.kind for c in wool.claims.unmatched("羊毛毯适合敏感肌肤。")] == ["judgement"]
    assert wool.claims.unmatched("羊毛毯不一定适合敏感肌肤。") == []
