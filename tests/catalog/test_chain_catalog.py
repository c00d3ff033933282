"""The catalog wired into the product: the chain's catalog step answers product messages from the catalog with no LLM
(route ``catalog``), and the HTTP APIs carry its cards, filters and sources. Real parts throughout: MiniLM, Chroma,
SQLite, the demo knowledge base, and the real `/api/v1` and `/v1` apps in-process (FastAPI's TestClient)."""

from __future__ import annotations

import json

import pytest

from catalog.live import LiveCatalog
from catalog.store import Catalog
from chains.schema import ChatRequest
from tandem.processes import free_port
from tests.api import api_client
from tests.catalog.shop import rows, write_feed
from tests.conftest import fresh_db, make_runtime

CARD_KEYS = {"id", "title", "price", "availability", "link", "image_link"}


@pytest.fixture(scope="module")
def shop(settings, encoder, demo_kb, tmp_path_factory):
    """A runtime whose catalog holds the shared test feed (13 products), and the folder the catalog lives in."""
    folder = tmp_path_factory.mktemp("catalog-chain")
    db = fresh_db(folder)
    live = LiveCatalog(db, encoder, chroma_path=folder / "chroma")
    live.open().ingest(write_feed(folder / "feed.tsv"))
    runtime = make_runtime(settings, db, demo_kb, catalog=live)
    return runtime, folder


def ask(runtime, message: str, **extra):
    return runtime.service.answer(ChatRequest(message=message, channel="api", **extra))


def catalog_step(response) -> dict:
    return next(step for step in response.trace if step["stage"] == "catalog")


def test_a_search_on_api_v1_answers_with_cards_in_order_and_the_filters_applied(shop, settings):
    runtime, _ = shop
    with api_client(settings, runtime) as client:
        body = client.post("/api/v1/chat", json={"message": "a blue throw blanket under $50"}).json()
        openai = client.post("/v1/chat/completions", json={
            "model": "tandem", "messages": [{"role": "user", "content": "a blue throw blanket under $50"}]}).json()
    assert body["route"] == "catalog" and body["served"] == "catalog"
    assert [c["id"] for c in body["products"]] == ["B1"]  # the blue merino throw is $89, the fleece is red
    assert set(body["products"][0]) >= CARD_KEYS and body["products"][0]["price"] == 39.90
    assert [(f["field"], f["label"], f["relaxed"]) for f in body["filters"]] == [
        ("category", "throw blanket", False), ("color", "blue", False), ("price", "under $50", False)]
    assert "**Filters:** blue · throw blanket · under $50" in body["answer"] and "$39.90" in body["answer"]
    assert body["reason"] == "looked up in our product catalog"
    info = openai["tandem"]
    assert info["route"] == "catalog" and [c["id"] for c in info["products"]] == ["B1"]
    assert [f["label"] for f in info["filters"]] == ["throw blanket", "blue", "under $50"]
    assert openai["choices"][0]["message"]["content"] == body["answer"]


def test_a_product_fact_names_the_field_and_the_product_as_its_sources(shop, settings):
    runtime, _ = shop
    with api_client(settings, runtime) as client:
        body = client.post("/api/v1/chat", json={"message": "are your towels pure cotton?"}).json()
    assert body["route"] == "catalog"
    assert {(s["product_id"], s["field"]) for s in body["sources"]} == {("T1", "material"), ("T2", "material")}
    assert "Organic Cotton Bath Towel: material is 100% organic cotton." in body["answer"]
    assert "(source: product T1, field `material`)" in body["answer"]
    assert {c["id"] for c in body["products"]} == {"T1", "T2"}


def test_a_fact_the_record_lacks_is_said_not_stated_and_cites_nothing(shop):
    runtime, _ = shop
    response = ask(runtime, "what is the warranty on the family kettle?")
    assert response.route == "catalog" and catalog_step(response)["detail"]["kind"] == "fact"
    assert "does not state its warranty" in response.answer and response.sources == []


def test_a_comparison_is_a_table_whose_cells_are_the_records_values(shop):
    runtime, _ = shop
    response = ask(runtime, "compare the two cheapest desk lamps")
    assert response.route == "catalog" and catalog_step(response)["detail"]["kind"] == "compare"
    ids = [c["id"] for c in response.products]
    assert ids == ["L2", "L3"]  # by the price paid: $19.90, then $35.00 on sale (list $44.90); the smart lamp is $64.50
    table = [line for line in response.answer.splitlines() if line.startswith("|")]
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table[2:]}
    catalog = runtime.catalog.open()
    for field in ("price", "sale_price", "power"):
        assert cells[field] == [catalog.get(i).field_value(field) or "not stated" for i in ids]
    assert cells["price"] == ["19.90 USD", "44.90 USD"] and cells["sale_price"] == ["not stated", "35.00 USD"]


def test_a_variant_question_says_whether_that_variant_is_in_stock(shop):
    runtime, _ = shop
    response = ask(runtime, "does the merino wool sweater come in navy in size L?")
    assert response.route == "catalog" and catalog_step(response)["detail"]["kind"] == "stock"
    assert response.answer.startswith("Merino Wool Sweater comes in Navy size L, but it is out of stock.")
    assert [c["id"] for c in response.products] == ["S2"]


def test_chinese_product_messages_are_answered_the_same_way(shop):
    runtime, _ = shop
    search = ask(runtime, "两百元以内的蓝色毯子")
    assert search.route == "catalog" and sorted(c["id"] for c in search.products) == ["B1", "B3"]
    assert "**筛选：** 蓝色 · 毯子 · 200元以内" in search.answer
    fact = ask(runtime, "这款毛巾是纯棉的吗？")
    assert fact.route == "catalog" and ("T1", "material") in {(s.product_id, s.field) for s in fact.sources}
    assert "有机棉浴巾的材质：100% organic cotton（来源：T1，字段 material）" in fact.answer


@pytest.mark.parametrize("message", ["my kettle stopped working, can I return it?",      # the customer's own item
                                     "how do I reset my password?"])
def test_non_product_messages_are_left_to_the_rest_of_the_chain(shop, message):
    runtime, _ = shop
    response = ask(runtime, message)
    assert response.route != "catalog" and response.products == [] and response.filters == []
    assert not any(step["stage"] == "catalog" for step in response.trace)


def test_advice_with_no_llm_in_the_run_gets_the_candidates_cards_from_the_catalog(shop, settings):
    runtime, _ = shop  # no LLM tier here: the catalog shows the candidates and says what they are
    with api_client(settings, runtime) as client:
        body = client.post("/api/v1/chat", json={"message": "which throw blanket is best for a cold bedroom?"}).json()
    assert body["route"] == "catalog" and body["intent"] == "advice"
    assert [c["id"] for c in body["products"]] == ["B1", "B4", "B3"]  # one per item group, by relevance
    assert "These are the products in our catalog that fit your question" in body["answer"]


def test_a_streamed_api_answer_sends_the_cards_and_filters_with_the_route_before_any_text(shop, settings):
    runtime, _ = shop
    with api_client(settings, runtime) as client:
        raw = client.post("/api/v1/chat", json={"message": "a blue throw blanket under $50", "stream": True}).text
    events = [json.loads(line[len("data: "):]) for line in raw.splitlines() if line.startswith("data: ")]
    first = events[0]
    assert first["route"] == "catalog" and [c["id"] for c in first["products"]] == ["B1"]
    assert [f["label"] for f in first["filters"]] == ["throw blanket", "blue", "under $50"]
    assert any("delta" in event for event in events[1:]) and "done" in events[-1]
    assert events[-1]["done"]["products"] == first["products"]


def test_advice_when_the_llm_cannot_be_reached_keeps_the_cards_with_the_honest_line_and_no_help_center_notice(
        shop, settings, encoder, demo_kb):
    shared, folder = shop  # the same catalog; the LLM tier points at a port nothing listens on (a refused connection)
    live = LiveCatalog(shared.db, encoder, chroma_path=folder / "chroma")
    dead = settings.model_copy(update={"llm_url": f"http://127.0.0.1:{free_port()}/v1", "llm_retries": 0})
    runtime = make_runtime(dead, shared.db, demo_kb, use_llm=True, catalog=live)
    try:
        response = ask(runtime, "which throw blanket is best for a cold bedroom?")
    finally:
        runtime.close()
    assert response.fallback and response.served == "candidates" and response.intent == "advice"
    assert [c["id"] for c in response.products] == ["B1", "B4", "B3"]
    assert "These are the products in our catalog that fit your question" in response.answer
    assert "help center" not in response.answer


@pytest.mark.parametrize("message", ["are your towels pure cotton and what is your return policy?",
                                     "Are your towels pure cotton? What is your return policy?"])
def test_a_mixed_message_gets_the_product_fact_and_the_policy_each_with_its_source(shop, settings, message):
    runtime, _ = shop
    with api_client(settings, runtime) as client:
        body = client.post("/api/v1/chat", json={"message": message}).json()
    assert body["route"] == "catalog" and body["intent"] == "mixed"
    assert "Organic Cotton Bath Towel: material is 100% organic cotton." in body["answer"]
    help_center = [s for s in body["sources"] if "product_id" not in s]
    assert {(s["product_id"], s["field"]) for s in body["sources"] if "product_id" in s} == {
        ("T1", "material"), ("T2", "material")}
    assert help_center and "return" in help_center[0]["answer_id"].lower() + help_center[0]["title"].lower()
    assert "Sources: [1] " + help_center[0]["title"] in body["answer"]  # the policy part keeps its citation
    step = catalog_step(runtime.service.answer(ChatRequest(message=message, channel="api")))
    assert [p["kind"] for p in step["detail"]["parts"]] == ["fact", "policy"]


def test_a_chinese_mixed_message_is_answered_in_both_parts(shop):
    runtime, _ = shop
    response = ask(runtime, "这款毛巾是纯棉的吗？退货政策是什么？")
    assert response.route == "catalog" and response.intent == "mixed"
    assert "有机棉浴巾的材质：100% organic cotton（来源：T1，字段 material）" in response.answer
    assert any(not s.product_id for s in response.sources) and "来源：[1] " in response.answer
    assert [p["kind"] for p in catalog_step(response)["detail"]["parts"]] == ["fact", "policy"]


def test_a_message_with_a_part_neither_answers_alone_is_left_to_the_chain(shop):
    runtime, _ = shop
    response = ask(runtime, "are your towels pure cotton and can you write my sister a poem about the sea?")
    assert response.route != "catalog" and response.intent == "" and response.products == []


def test_the_intent_is_the_routes_detail_in_the_response_and_the_request_log(shop, settings):
    from storage.tables import RequestLog

    runtime, _ = shop
    with api_client(settings, runtime) as client:
        intents = {message: client.post("/api/v1/chat", json={"message": message}).json()
                   for message in ("a blue throw blanket under $50", "are your towels pure cotton?",
                                   "compare the two cheapest desk lamps", "is the merino wool sweater in stock?",
                                   "how do I reset my password?")}
    assert [(b["route"], b["intent"]) for b in intents.values()] == [
        ("catalog", "search"), ("catalog", "fact"), ("catalog", "compare"), ("catalog", "stock"),
        (intents["how do I reset my password?"]["route"], "")]
    with runtime.db.session() as session:
        logged = [session.get(RequestLog, b["request_id"]).intent for b in intents.values()]
    assert logged == ["search", "fact", "compare", "stock", ""]


def test_a_price_changed_by_a_re_ingest_is_in_the_next_answer_never_a_cached_one(shop):
    runtime, folder = shop
    first = ask(runtime, "a blue cotton throw blanket")
    again = ask(runtime, "a blue cotton throw blanket")
    assert first.route == again.route == "catalog" and first.products[0]["price"] == again.products[0]["price"] == 39.90
    # `tandem catalog ingest` in another process: a Catalog of its own over the same database and Chroma store
    changed = [dict(r, price="29.50 USD") if r["id"] == "B1" else r for r in rows()]
    report = Catalog(runtime.db, runtime.encoder, chroma_path=folder / "chroma").ingest(
        write_feed(folder / "changed.tsv", changed))
    try:
        assert report.updated == 1 and report.embedded == 0  # a price is no text: nothing embedded again
        after = ask(runtime, "a blue cotton throw blanket")
        assert after.route == "catalog" and after.products[0]["id"] == "B1" and after.products[0]["price"] == 29.50
        assert "$29.50" in after.answer and "$39.90" not in after.answer
        assert catalog_step(after)["detail"]["version"] == report.version
    finally:
        Catalog(runtime.db, runtime.encoder, chroma_path=folder / "chroma").ingest(write_feed(folder / "back.tsv"))


def test_with_no_catalog_ingested_a_product_message_is_answered_as_before(settings, encoder, demo_kb, tmp_path):
    db = fresh_db(tmp_path)
    live = LiveCatalog(db, encoder, chroma_path=tmp_path / "chroma")
    runtime = make_runtime(settings, db, demo_kb, catalog=live)
    with api_client(settings, runtime) as client:
        body = client.post("/api/v1/chat", json={"message": "a blue throw blanket under $50"}).json()
    assert body["route"] in ("small", "llm") and body["products"] == [] and body["filters"] == []
    response = ask(runtime, "compare the two cheapest desk lamps")
    assert response.route != "catalog" and not any(step["stage"] == "catalog" for step in response.trace)
    assert live.current() is None and not (tmp_path / "chroma").exists()  # nothing of the catalog was opened


def test_the_catalog_tier_is_registered_never_cached_and_listed_by_the_console():
    from chains.schema import ROUTES as RESPONSE_ROUTES
    from chains.tiers import TIERS, cacheable
    from console.stats import ROUTES

    assert TIERS["catalog"].plans == ("catalog",) and TIERS["catalog"].ruled_only and not cacheable("catalog")
    assert "catalog" in RESPONSE_ROUTES and "catalog" in ROUTES


def test_a_catalog_that_cannot_be_read_leaves_the_message_to_the_rest_of_the_chain(settings, encoder, demo_kb, tmp_path):
    from sqlalchemy import text

    db = fresh_db(tmp_path)
    live = LiveCatalog(db, encoder, chroma_path=tmp_path / "chroma")
    live.open().ingest(write_feed(tmp_path / "feed.tsv"))
    runtime = make_runtime(settings, db, demo_kb, catalog=live)
    with db.engine.begin() as connection:  # a real fault: the catalog's version table is gone
        connection.execute(text("DROP TABLE catalog_state"))
    response = ask(runtime, "a blue throw blanket under $50")
    assert response.route in ("small", "llm") and not response.fallback and response.products == []
    assert catalog_step(response)["decision"] == "unavailable" and "catalog_state" in catalog_step(response)["detail"]["error"]
