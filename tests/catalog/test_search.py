"""Search, facts and comparisons over a real catalog (real MiniLM, real Chroma, SQLite): filters that really filter,
a relaxed constraint named, "we don't carry that" only for a kind the catalog lacks, facts with their source or
"not stated", and comparison cells read from the records."""

from __future__ import annotations

import pytest

from catalog.reply import intent
from catalog.search import ProductSearch
from tests.catalog.shop import open_catalog, rows, write_feed


@pytest.fixture(scope="module")
def shop(encoder, tmp_path_factory):
    folder = tmp_path_factory.mktemp("catalog")
    catalog = open_catalog(folder / "store", encoder)
    catalog.ingest(write_feed(folder / "feed.tsv"))
    return ProductSearch(catalog)


def _price(shop, card_id):
    return shop.catalog.get(card_id).effective_price


def test_filters_really_filter_and_show_their_label(shop):
    answer = shop.search("a blue throw blanket under $50")
    assert answer.filters.label == "blue · throw blanket · under $50"
    assert [c.id for c in answer.products] == ["B1"]  # the blue merino throw is $89, the fleece is red
    assert answer.carried and not answer.relaxed and answer.note == ""


def test_chinese_search_filters_the_same_and_shows_chinese_titles(shop):
    answer = shop.search("两百元以内的蓝色毯子")
    assert answer.filters.label == "蓝色 · 毯子 · 200元以内"
    assert sorted(c.id for c in answer.products) == ["B1", "B3"]
    assert {c.title for c in answer.products} == {"纯棉盖毯 蓝色", "美利奴羊毛盖毯 蓝色"}


def test_in_stock_and_size_filter_variants(shop):
    answer = shop.search("merino sweater in size L in stock")  # the only L is out of stock
    assert answer.relaxed == ["in stock"] and [c.id for c in answer.products] == ["S2"]
    assert "in stock" in answer.note
    assert [c.id for c in shop.search("merino sweater in size M in stock").products] == ["S1"]


def test_when_nothing_matches_one_constraint_is_relaxed_and_named(shop):
    answer = shop.search("a red cotton throw blanket")  # red: only the fleece; cotton: only blue and grey
    assert answer.relaxed == ["color Red"]
    assert {c.id for c in answer.products} <= {"B1", "B2"} and answer.products
    assert "without color Red" in answer.note and answer.carried


def test_a_value_the_catalog_lacks_is_said_and_the_kind_is_still_shown(shop):
    answer = shop.search("a purple throw blanket")
    assert answer.carried and answer.filters.missing == ["color purple"]
    assert "purple" in answer.note and answer.products
    assert {shop.catalog.get(c.id).category for c in answer.products} == {"Throw Blankets"}


@pytest.mark.parametrize("message", ["do you sell bicycles?", "find me a blue coat", "你们卖自行车吗"])
def test_we_dont_carry_only_what_the_catalog_has_nothing_of(shop, message):
    answer = shop.search(message)
    assert not answer.carried and answer.products == []


@pytest.mark.parametrize("message", ["do you sell throws?", "any blankets for the sofa?", "有没有蓝色的毯子",
                                     "something to read books in bed with a light"])
def test_a_kind_the_catalog_has_is_never_refused(shop, message):
    answer = shop.search(message)
    assert answer.carried and answer.products


def test_a_fact_is_read_from_the_named_products_attribute_with_its_source(shop):
    answer = shop.fact("how many litres is the family kettle?")
    [fact] = answer.facts
    assert (fact.product_id, fact.field, fact.value, fact.stated) == ("K1", "capacity", "2.2 L", True)
    assert answer.sources == [{"product_id": "K1", "field": "capacity"}]


def test_a_field_the_record_lacks_is_not_stated(shop):
    [fact] = shop.fact("what is the warranty on the Merino Wool Throw?").facts
    assert (fact.product_id, fact.field, fact.value, fact.stated) == ("B3", "warranty", "", False)
    assert "does not state" in fact.text


def test_a_question_about_a_kind_is_answered_for_each_of_its_products(shop):
    answer = shop.fact("are your towels pure cotton?")
    assert {(f.product_id, f.field, f.value) for f in answer.facts} == {
        ("T1", "material", "100% organic cotton"), ("T2", "material", "Microfibre (polyester and polyamide)")}
    zh = shop.fact("这款毛巾是纯棉的吗？")
    assert {(f.product_id, f.field) for f in zh.facts} == {("T1", "material"), ("T2", "material")}
    assert all(f.text.startswith(f.title) and "材质" in f.text for f in zh.facts)


def test_a_fact_found_by_the_attribute_ranking_cites_the_record(shop):
    [fact] = shop.fact("does the travel kettle work on 110 volts in the US?").facts
    assert (fact.product_id, fact.field, fact.value) == ("K2", "voltage", "110-240 V")


def test_comparison_of_the_two_cheapest_desk_lamps_has_every_cell_from_a_record(shop):
    table = shop.compare("can you compare your two cheapest desk lamps?")
    assert [c.id for c in table.products] == ["L2", "L3"]  # 19.90, then 35.00 on sale (44.90), not the 64.50 one
    fields = [row.field for row in table.rows]
    assert fields[:3] == ["price", "sale_price", "availability"] and {"power", "battery life", "bulb"} <= set(fields)
    for row in table.rows:
        for cell in row.cells:
            record = shop.catalog.get(cell.product_id)
            assert cell.value == record.field_value(row.field) and cell.stated == bool(cell.value)
    bulb = next(row for row in table.rows if row.field == "bulb")
    assert [(c.product_id, c.stated) for c in bulb.cells] == [("L2", False), ("L3", True)]
    assert "not stated" in table.markdown()


def test_comparison_of_named_products(shop):
    table = shop.compare("compare the Smart LED Desk Lamp and the Swing-Arm Desk Lamp")
    assert sorted(c.id for c in table.products) == ["L1", "L3"]
    by_ids = shop.compare(product_ids=["K1", "K2", "B1"])
    capacity = next(row for row in by_ids.rows if row.field == "capacity")
    assert [c.value for c in capacity.cells] == ["2.2 L", "0.8 L", ""]


def test_a_comparisons_columns_follow_the_order_the_customer_named_the_products(shop):
    ids = [[c.id for c in shop.compare(message).products] for message in (
        "compare the Smart LED Desk Lamp and the Swing-Arm Desk Lamp", "compare the swing-arm lamp and the smart lamp",
        "家庭电水壶和旅行电水壶比较一下", "旅行电水壶和家庭电水壶比较一下")]
    assert ids == [["L1", "L3"], ["L3", "L1"], ["K1", "K2"], ["K2", "K1"]]


def test_a_variant_question_says_whether_that_colour_and_size_exist_and_are_in_stock(shop):
    in_stock = shop.variant("is the merino wool sweater available in navy in size M?")
    assert (in_stock.offered, [c.id for c in in_stock.variants]) == (True, ["S1"]) and "in stock" in in_stock.text
    sold_out = shop.variant("is it in navy in size L?", product_id="S1")
    assert [c.id for c in sold_out.variants] == ["S2"] and "out of stock" in sold_out.text
    absent = shop.variant("do you have it in blue in size M?", product_id="S1")
    assert not absent.offered and absent.variants == [] and absent.colors == ["Navy"]
    assert absent.text == "Merino Wool Sweater does not come in Blue size M; it comes in Navy; sizes M, L."


# ---- found by the catalog eval's dev split (knowledge/eval/catalog_messages.csv) -----------------------------------
def test_a_chinese_message_names_a_product_by_its_chinese_title(shop):
    [fact] = shop.fact("家庭电水壶能装多少升？").facts  # 家庭电水壶 2.2 升, named by part of its title
    assert (fact.product_id, fact.field, fact.value) == ("K1", "capacity", "2.2 L")
    table = shop.compare("家庭电水壶和旅行电水壶比较一下")
    assert sorted(c.id for c in table.products) == ["K1", "K2"]


def test_how_much_a_product_weighs_is_not_its_price(shop):
    [fact] = shop.fact("how much does the family kettle weigh?").facts
    assert (fact.product_id, fact.field, fact.stated) == ("K1", "weight", False)  # the record has no weight: no guess


def test_a_material_word_names_the_product_in_a_comparison_and_a_variant_question(shop):
    filters = shop.parse("compare the merino wool throw and the fleece blanket")
    assert filters.material == "" and filters.categories == ["Throw Blankets"]
    table = shop.compare("compare the merino wool throw and the fleece blanket")
    assert sorted(c.id for c in table.products) == ["B3", "B4"]
    navy = shop.variant("is the merino throw available in navy?")  # the merino throw, not the first throw
    assert (navy.group, navy.offered, navy.colors) == ("merino-throw", False, ["Blue"])
    assert shop.parse("a wool throw under $100").material == "wool"  # outside a comparison it still filters


@pytest.fixture(scope="module")
def headphones(encoder, tmp_path_factory):
    folder = tmp_path_factory.mktemp("headphones")
    row = {"id": "H1", "title": "Noise-Cancelling Headphones - Black", "price": "149.00 USD", "availability": "in_stock",
           "brand": "Northwind", "color": "Black", "material": "Plastic", "product_type": "Electronics > Headphones",
           "item_group_id": "nc", "product_detail": "Features:noise cancelling:active,Warranty:warranty:2 years",
           "title_zh": "降噪耳机 黑色", "product_type_zh": "电子 > 耳机"}
    catalog = open_catalog(folder / "store", encoder)
    catalog.ingest(write_feed(folder / "feed.tsv", [*rows(), row]))
    return ProductSearch(catalog)


def test_a_field_word_in_the_products_own_name_is_not_the_field_asked(headphones):
    message = "how long is the warranty on the noise cancelling headphones?"
    found = intent(headphones, message)  # "cancelling" is not an order's cancellation
    assert found is not None and found.kind == "fact"
    [fact] = headphones.fact(message).facts
    assert (fact.product_id, fact.field, fact.value) == ("H1", "warranty", "2 years")


def test_come_in_asks_for_a_variant_only_about_a_colour_or_size(headphones):
    assert intent(headphones, "does the merino wool sweater come in navy?").kind == "stock"
    assert intent(headphones, "what colours does the merino wool sweater come in?").kind == "stock"
    assert intent(headphones, "what fabric does the merino wool sweater come in?").kind == "fact"


# ---- found by the second dev round (knowledge/eval/README.md): products named by a measure, a rare material word,
# or the name of a kind the catalog has one product of -----------------------------------------------------------
def test_a_titles_number_with_its_unit_names_the_product(shop):
    assert [p.id for p in shop.named("how heavy is the 0.8 litre kettle?")] == ["K2"]
    assert shop.named("are 2 kettles cheaper together?") == []  # a count, not a measure


def test_a_material_word_only_one_title_has_names_that_product(shop):
    assert [p.id for p in shop.named("is the organic one thick?")] == ["T1"]
    assert shop.named("is the merino one warm?") == []  # a sweater and a throw are merino


def test_the_name_of_a_kind_with_one_product_names_it(shop):
    assert [p.group for p in shop.named("how do I wash the sweater?")] == ["merino-sweater"]
    assert shop.named("how do I wash the throw?") == []  # three throws

