"""Product facts no field word names: the attribute ranking (catalog.field_ranking, the semiPQA ranker) picks among
the fields of the product's kind, above its floor only, and a field the record lacks is "not stated", never a
sibling's value. Real MiniLM, real Chroma, SQLite; the shared small feed plus garden gloves and a kettle with a
"cups" field, written for these tests."""

from __future__ import annotations

import pytest

from catalog.field_ranking import kind_fields, without_name
from catalog.reply import intent, reply
from catalog.search import ProductSearch
from tests.catalog.shop import open_catalog, rows, write_feed

GLOVES = ("Garden > Tools > Garden Gloves", "园艺 > 工具 > 园艺手套")
EXTRA = [
    {"id": "G1", "title": "Leather Garden Gloves", "price": "18.00 USD", "availability": "in_stock",
     "brand": "Northwind", "material": "Goatskin leather", "product_type": GLOVES[0], "product_type_zh": GLOVES[1],
     "item_group_id": "leather-gloves", "title_zh": "皮革园艺手套",
     "product_detail": "Specifications:cuff length:15 cm,Protection:thorn proof:yes"},
    {"id": "G2", "title": "Nitrile Garden Gloves", "price": "6.00 USD", "availability": "in_stock",
     "brand": "Northwind", "material": "Nitrile-coated nylon", "product_type": GLOVES[0], "product_type_zh": GLOVES[1],
     "item_group_id": "nitrile-gloves", "title_zh": "丁腈园艺手套", "product_detail": "Specifications:cuff length:10 cm"},
    {"id": "K3", "title": "Pebble Kettle 1.2 L", "price": "34.00 USD", "availability": "in_stock", "brand": "Northwind",
     "material": "Stainless steel", "product_type": "Home > Kitchen > Kettles", "product_type_zh": "家居 > 厨房 > 电水壶",
     "item_group_id": "pebble", "title_zh": "鹅卵石电水壶 1.2 升",
     "product_detail": "Specifications:capacity:1.2 L,Specifications:cups:5"},
]


@pytest.fixture(scope="module")
def shop(encoder, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fact-ranking")
    catalog = open_catalog(folder / "store", encoder)
    catalog.ingest(write_feed(folder / "feed.tsv", [*rows(), *EXTRA]))
    return ProductSearch(catalog)


def _facts(shop, message, last_answer=""):
    found = intent(shop, message, last_answer)
    assert found is not None and found.kind == "fact", message
    answer = reply(shop, message, found)
    assert answer is not None
    return answer.detail["facts"], answer


def test_the_ranking_answers_a_field_no_field_word_names_with_its_source(shop):
    facts, answer = _facts(shop, "will the leather garden gloves stop rose thorns?")
    assert facts == [{"product_id": "G1", "field": "thorn proof", "stated": True}]
    assert answer.sources[0]["field"] == "thorn proof" and "thorn proof is yes" in answer.text


def test_a_field_only_a_sibling_states_is_not_stated_never_the_siblings_value(shop):
    facts, answer = _facts(shop, "do the nitrile garden gloves stop rose thorns?")
    assert facts == [{"product_id": "G2", "field": "thorn proof", "stated": False}]
    assert answer.sources == [] and "does not state its thorn proof" in answer.text and "yes" not in answer.text


def test_the_kinds_fields_carry_a_siblings_value_only_for_ranking(shop):
    fields = {name: (value, stated) for name, value, stated in kind_fields(
        shop.catalog.get("G2"), [shop.catalog.get("G1"), shop.catalog.get("G2")])}
    assert fields["thorn proof"] == ("yes", False) and fields["cuff length"] == ("10 cm", True)


def test_the_words_naming_the_product_are_left_out_of_the_question():
    assert without_name("how many cups does the pebble kettle make?", {"pebble", "kettle"}) == \
        "how many cups does the make ?"
    assert without_name("皮革园艺手套防刺吗", set(), ["皮革园艺手套"]) == "防 刺 吗"


def test_the_product_in_context_is_ranked_for_it(shop):
    facts, _ = _facts(shop, "will they stop rose thorns?", last_answer="The **Leather Garden Gloves** are $18.00.")
    assert facts == [{"product_id": "G1", "field": "thorn proof", "stated": True}]


def test_below_the_floor_the_message_keeps_todays_route(shop):
    found = intent(shop, "does the travel kettle sing?")  # no field of kettles fits: not a fact, a bare search
    assert found is not None and found.kind == "search"
    assert intent(shop, "how do I descale the family kettle?") is None  # a how-to stays with the help center


def test_a_field_word_names_the_field_even_when_the_ranking_would_pick_a_stated_one(shop):
    message = "how far up the wrist do the leather gloves go?"  # "how far": arm reach, which gloves do not state
    ranked = shop.ranked_field(message, shop.catalog.get("G1"))
    assert ranked is not None and ranked.confident and ranked.name == "cuff length"
    facts, answer = _facts(shop, message)
    assert facts == [{"product_id": "G1", "field": "arm reach", "stated": False}] and "15 cm" not in answer.text


def test_the_named_products_own_field_beats_another_fields_wording(shop):
    assert shop.asked_field("how many cups will the pebble kettle make?") == "cups"
    assert shop.asked_field("how many cups will the family kettle make?") == "capacity"  # K1 has no cups field


def test_a_chinese_fact_question_without_a_question_mark_is_taken_up(shop):
    facts, answer = _facts(shop, "旅行电水壶电压多少")
    assert facts == [{"product_id": "K2", "field": "voltage", "stated": True}] and "110-240 V" in answer.text
    facts, _ = _facts(shop, "摇臂台灯多重")
    assert facts == [{"product_id": "L3", "field": "weight", "stated": False}]


@pytest.fixture(scope="module")
def tea_shop(encoder, tmp_path_factory):
    from pathlib import Path

    catalog = open_catalog(tmp_path_factory.mktemp("tea") / "store", encoder)
    catalog.ingest(Path(__file__).resolve().parent / "data" / "tea_shop.tsv")
    return ProductSearch(catalog)


def test_a_colour_word_in_a_tea_shops_names_is_no_colour_in_the_chat(tea_shop):
    found = intent(tea_shop, "is there caffeine in the red rooibos?")
    assert found is not None and found.kind == "fact"  # not a stock question about a red variant
    facts, answer = _facts(tea_shop, "is there caffeine in the red rooibos?")
    assert facts == [{"product_id": "LK-ROOIBOS-100", "field": "caffeine", "stated": True}] and "none" in answer.text
    green = tea_shop.search("any green tea for less than $15?")
    assert green.relaxed == [] and green.note == ""
    assert {c.id for c in green.products} == {"LK-SENCHA-100", "LK-GUNPOWDER-250"}  # the pearls are $18
