"""Ingest: Merchant Center TSV and Shopify CSV feeds, bad rows by line, idempotent upserts, --replace, and a price or
stock change that writes rows without embedding anything again, with the catalog version bumped."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from catalog.feed import gtin_valid, read_feed
from tests.catalog.shop import open_catalog, rows, write_feed

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def catalog(encoder, tmp_path):
    return open_catalog(tmp_path / "store", encoder)


def _line(values: dict[str, str]) -> str:
    from tests.catalog.shop import COLUMNS

    return "\t".join(values.get(c, "") for c in COLUMNS)


def test_bad_rows_are_reported_by_line_and_the_good_rows_are_stored(catalog, tmp_path):
    good = rows()
    bad = [_line({**good[0], "id": "X1", "price": "cheap"}),              # line 15: the header and 13 good rows before it
           _line({**good[0], "id": "X2", "availability": "sold out"}),    # line 16
           _line({**good[0], "id": "X3", "gtin": "2000000000016"}),        # line 17: wrong check digit
           _line({**good[0], "title": "Duplicate kettle"}),               # line 18: K1 again
           _line({**good[0], "id": "X5", "product_detail": "capacity 2 L"})]  # line 19
    report = catalog.ingest(write_feed(tmp_path / "feed.tsv", extra_lines=bad))
    reasons = {b.line: b.reason for b in report.bad}
    assert sorted(reasons) == [15, 16, 17, 18, 19]
    assert "price 'cheap'" in reasons[15]
    assert "availability 'sold out'" in reasons[16]
    assert "check digit" in reasons[17]
    assert "repeats line 2" in reasons[18]
    assert "section:attribute:value" in reasons[19]
    assert report.added == len(good) and len(catalog) == len(good)
    assert catalog.get("X1") is None


def test_ingesting_the_same_feed_again_changes_nothing(catalog, tmp_path):
    feed = write_feed(tmp_path / "feed.tsv")
    first = catalog.ingest(feed)
    again = catalog.ingest(feed)
    assert (first.added, first.embedded, first.version) == (len(rows()), len(rows()), 1)
    assert (again.added, again.updated, again.unchanged, again.embedded) == (0, 0, len(rows()), 0)
    assert again.version == first.version == catalog.version


def test_a_price_and_stock_update_is_stored_without_embedding_and_bumps_the_version(catalog, tmp_path):
    catalog.ingest(write_feed(tmp_path / "feed.tsv"))
    vectors_before = catalog.spaces["en"].vectors.copy()
    changed = rows()
    changed[0]["price"] = "54.90 USD"
    changed[1]["availability"] = "out_of_stock"
    report = catalog.ingest(write_feed(tmp_path / "feed2.tsv", changed))
    assert (report.updated, report.unchanged, report.embedded) == (2, len(changed) - 2, 0)
    assert report.version == 2 == catalog.version
    assert catalog.get("K1").price == 54.90 and catalog.get("K2").availability == "out_of_stock"
    assert (catalog.spaces["en"].vectors == vectors_before).all()
    # a text change is embedded again (that product only)
    changed[0]["description"] = "Our largest kettle: nine cups at once, with a water window on both sides."
    report = catalog.ingest(write_feed(tmp_path / "feed3.tsv", changed))
    assert (report.updated, report.embedded, report.version) == (1, 1, 3)


def test_an_unchanged_product_whose_vectors_are_missing_is_embedded_again(encoder, tmp_path):
    from catalog.store import Catalog
    from storage.db import Database

    first = open_catalog(tmp_path / "store", encoder)
    first.ingest(write_feed(tmp_path / "feed.tsv"))
    # the same database with an empty Chroma store (moved away, or a new Chroma server)
    fresh = Catalog(Database(f"sqlite:///{tmp_path / 'store' / 'catalog.db'}"), encoder, chroma_path=tmp_path / "chroma2")
    assert fresh.spaces["en"].ids == []
    report = fresh.ingest(write_feed(tmp_path / "feed.tsv"))
    assert (report.unchanged, report.embedded, report.version) == (len(rows()), len(rows()), 1)
    assert sorted(fresh.spaces["en"].ids) == sorted(fresh.spaces["zh"].ids) == sorted(r["id"] for r in rows())


def test_only_the_english_texts_are_embedded_and_the_chinese_space_ranks_its_own_texts_on_their_vectors(catalog,
                                                                                                      tmp_path):
    report = catalog.ingest(write_feed(tmp_path / "feed.tsv"))
    en, zh = catalog.spaces["en"], catalog.spaces["zh"]
    assert report.embedded == len(rows()) and sorted(en.ids) == sorted(r["id"] for r in rows())
    assert zh.ids == en.ids and zh.vectors is en.vectors
    stored = catalog._client.get_collection("tandem_catalog_en").count()
    names = {c.name for c in catalog._client.list_collections()}
    assert stored == len(rows()) and "tandem_catalog_zh" not in names
    # BM25 over the Chinese texts: a Chinese message's words find the Chinese title
    lexical = zh.index.lexical_scores("美利奴羊毛衫")
    assert en.ids[int(lexical.argmax())] in ("S1", "S2")


def test_a_catalog_with_the_older_chinese_vectors_is_read_and_a_price_update_embeds_nothing_and_drops_them(encoder,
                                                                                                         tmp_path):
    """Catalogs ingested before the Chinese texts stopped being embedded have a second collection of MiniLM vectors of
    the Chinese texts (written here as that code wrote it): it is not read, no product is embedded again, and the next
    ingest deletes it."""
    from catalog.store import product_text
    from knowledge import store as chroma

    older = open_catalog(tmp_path / "store", encoder)
    older.ingest(write_feed(tmp_path / "feed.tsv"))
    products = list(older.products.values())
    texts = [product_text(p, "zh") for p in products]
    collection = chroma.open_collection(older._client, "tandem_catalog_zh", encoder)
    collection.upsert(ids=[p.id for p in products], documents=texts, metadatas=[{"text_hash": p.text_hash}
                                                                                for p in products],
                      embeddings=encoder.encode_passages(texts))
    reopened = open_catalog(tmp_path / "store", encoder)
    assert reopened.spaces["zh"].ids == reopened.spaces["en"].ids and len(reopened.spaces["zh"].ids) == len(products)
    changed = rows()
    changed[0]["price"] = "54.90 USD"
    report = reopened.ingest(write_feed(tmp_path / "feed2.tsv", changed))
    assert (report.updated, report.embedded, report.version) == (1, 0, 2)
    assert reopened.get("K1").price == 54.90
    assert "tandem_catalog_zh" not in {c.name for c in reopened._client.list_collections()}


def test_replace_removes_products_the_feed_no_longer_lists_but_keeps_those_of_its_bad_rows(catalog, tmp_path):
    catalog.ingest(write_feed(tmp_path / "feed.tsv"))
    kept = [r for r in rows() if r["id"] not in ("K2", "B4")]
    typo = _line({**rows()[1], "price": "24,9O USD"})  # K2's row, now unreadable: not a reason to delete K2
    report = catalog.ingest(write_feed(tmp_path / "feed2.tsv", kept, [typo]), replace=True)
    assert report.removed == 1 and [b.line for b in report.bad] == [len(kept) + 2]
    assert catalog.get("B4") is None and catalog.get("K2") is not None
    assert "B4" not in catalog.spaces["en"].ids and "B4" not in catalog.spaces["zh"].ids
    assert report.version == 2


SHOPIFY = "\n".join([
    "Handle,Title,Body (HTML),Vendor,Type,Option1 Name,Option1 Value,Option2 Name,Option2 Value,Variant SKU,Variant Price,"
    "Variant Inventory Qty,Variant Barcode,Image Src",
    'wool-beanie,Wool Beanie,"<p>A <b>ribbed</b> beanie in lambswool.</p>",Northwind,Hats,Color,Grey,Size'
    ',One size,BEANIE-GREY,19.00,4,2000000000145,https://img.example/beanie.png',
    'wool-beanie,,,,,,Navy,,One size,BEANIE-NAVY,19.00,0,,',
    'wool-beanie,,,,,,Red,,One size,BEANIE-RED,nineteen,3,,',
    'wool-beanie,,,,,,,,,,,,,https://img.example/extra.png',
    'orphan,,,,,,Blue,,,ORPHAN-1,5.00,1,,',
]) + "\n"


def test_a_shopify_export_is_read_as_variants_with_bad_rows_by_line(catalog, tmp_path):
    path = tmp_path / "products_export.csv"
    path.write_text(SHOPIFY, encoding="utf-8")
    feed = read_feed(path)
    assert feed.format == "shopify"
    by_id = {p.id: p for p in feed.products}
    assert sorted(by_id) == ["BEANIE-GREY", "BEANIE-NAVY"]
    grey, navy = by_id["BEANIE-GREY"], by_id["BEANIE-NAVY"]
    assert grey.description == "A ribbed beanie in lambswool."
    assert (grey.color, grey.size, grey.item_group_id, grey.gtin) == ("Grey", "One size", "wool-beanie", "2000000000145")
    assert grey.title == "Wool Beanie - Grey / One size" and grey.image_link == "https://img.example/beanie.png"
    assert (grey.availability, navy.availability, navy.product_type, navy.brand) == ("in_stock", "out_of_stock", "Hats",
                                                                                     "Northwind")
    # line 5 is an extra picture of the beanie (no variant price): not a product, not an error
    assert [b.line for b in feed.bad] == [4, 6]
    assert "Variant Price" not in feed.bad[0].reason and "'nineteen'" in feed.bad[0].reason
    assert "before the row with its Title" in feed.bad[1].reason
    report = catalog.ingest(path)
    assert report.added == 2 and catalog.get("BEANIE-NAVY").price == 19.0


def test_the_demo_catalog_is_the_generators_output_and_a_valid_feed():
    spec = importlib.util.spec_from_file_location("make_demo_catalog", REPO / "scripts" / "make_demo_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = REPO / "catalog" / "demo" / "catalog.tsv"
    with path.open(encoding="utf-8", newline="") as handle:
        committed = list(csv.DictReader(handle, delimiter="\t"))
    assert committed == module.rows()  # deterministic, and the committed file is up to date
    feed = read_feed(path)
    assert not feed.bad and len(feed.products) >= 150
    assert all(len(p.gtin) == 13 and gtin_valid(p.gtin) for p in feed.products)
    assert all(p.title_zh and p.description_zh and p.product_type_zh for p in feed.products)
    assert sum(p.availability == "out_of_stock" for p in feed.products) >= 5
    groups: dict[str, set] = {}
    for p in feed.products:
        groups.setdefault(p.item_group_id, set()).add((p.color, p.size))
    assert sum(len(v) > 1 for v in groups.values()) >= 20
    titles = {p.title.split(" - ")[0] for p in feed.products}
    with (REPO / "knowledge" / "demo" / "orders.csv").open(encoding="utf-8") as handle:
        items = [item.split("x ", 1)[1] for order in csv.DictReader(handle) for item in order["items"].split("|")]
    named = [i if i in titles else i.rsplit(" (", 1)[0] for i in items]  # "(M)", "(32/32)": the size ordered
    assert [i for i in named if i not in titles] == []


def test_an_ingest_on_two_encoder_workers_stores_the_same_rows_and_vectors_as_on_one(tmp_path):
    """The CLI ingests with one encoder batch per core at once (the ONNX export that `tandem models prepare` makes
    and the bench serves); the texts go through one call in batches sorted by token count."""
    import numpy as np

    from bench.catalog_feed import synthetic_feed
    from core.encoders import OnnxEncoder, export_dir
    from core.model_files import minilm_path

    exported = export_dir(minilm_path(), REPO / ".tandem")
    encoder = OnnxEncoder(exported, "minilm", "model.onnx", "test")
    feed = synthetic_feed(200, tmp_path / "feed.tsv")  # 200 texts: several batches of 64
    one, two = open_catalog(tmp_path / "one", encoder), open_catalog(tmp_path / "two", encoder)
    first, second = one.ingest(feed, workers=1), two.ingest(feed, workers=2)
    assert first.as_dict() == second.as_dict() and second.embedded == 200
    assert {p.id: p.text_hash for p in one.products.values()} == {p.id: p.text_hash for p in two.products.values()}
    for lang in ("en", "zh"):
        assert one.spaces[lang].ids == two.spaces[lang].ids and len(two.spaces[lang].ids) == 200
        assert np.array_equal(one.spaces[lang].vectors, two.spaces[lang].vectors)
    # a text's vector does not depend on the batch it was in: the same as embedded alone
    from catalog.store import product_text

    sample = [two.products[pid] for pid in two.spaces["en"].ids[::40]]
    alone = np.stack([encoder.encode_passages([product_text(p, "en")])[0] for p in sample])
    assert float(np.abs(alone - two.spaces["en"].vectors[::40]).max()) < 1e-5
