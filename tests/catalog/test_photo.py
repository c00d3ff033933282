"""A photo of a product finds it: its barcode read with zxing-cpp (the GTIN first), else its label's text (RapidOCR);
when nothing is found the reply says so. Real parts: the photos are rendered here (the catalog's EAN-13 images,
turned, shot at an angle, blurred, JPEG'd: offline/photo_eval.py), read by the real MediaReader and answered by the
real chain over the shared test feed (MiniLM, Chroma, SQLite), through `/v1` and the chat UI's request builder."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from app.media import MediaReader, read_barcodes
from app.ui import build_request
from catalog.images import render_barcode
from catalog.live import LiveCatalog
from catalog.log import searches
from offline.photo_eval import measure, photo_of
from tests.api import api_client
from tests.catalog.shop import write_feed
from tests.conftest import fresh_db, make_runtime

FAMILY_KETTLE_GTIN = "2000000000015"  # K1 in tests/catalog/shop.py
NOT_IN_CATALOG = "4006381333931"  # a valid EAN-13 no product of the test feed has


@pytest.fixture(scope="module")
def shop(settings, encoder, demo_kb, tmp_path_factory):
    folder = tmp_path_factory.mktemp("catalog-photo")
    db = fresh_db(folder)
    live = LiveCatalog(db, encoder, chroma_path=folder / "chroma")
    live.open().ingest(write_feed(folder / "feed.tsv"))
    return make_runtime(settings, db, demo_kb, catalog=live), db, folder


def barcode_photo(gtin: str, folder: Path, seed: int = 7) -> Path:
    from PIL import Image

    photo = photo_of(Image.open(render_barcode(gtin, folder / f"{gtin}.png")), seed)
    path = folder / f"{gtin}-{seed}.jpg"
    photo.save(path)
    return path


def label_photo(text: str, folder: Path) -> Path:
    """A product label: the title in dark type on a light card, slightly turned."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (900, 260), (236, 232, 222))
    ImageDraw.Draw(image).text((40, 90), text, fill=(30, 30, 30), font=ImageFont.load_default(size=48))
    path = folder / "label.png"
    image.rotate(4, expand=True, fillcolor=(180, 180, 180)).save(path)
    return path


def test_at_least_95_percent_of_rendered_barcode_photos_are_read_back_to_their_gtin():
    # 156 photos, one per demo product: turned up to 40 degrees, perspective, blur, uneven light, noise, JPEG
    result = measure(per_product=1)
    assert result.total == 156
    assert result.share >= 0.95, (result.found, result.misses)


def test_a_photo_with_no_barcode_reads_none():
    from PIL import Image

    assert read_barcodes(Image.new("RGB", (400, 300), (120, 160, 200))) == []


def test_a_barcode_photo_sent_to_v1_finds_its_product_by_gtin(shop, settings, tmp_path):
    runtime, db, _ = shop
    data = base64.b64encode(barcode_photo(FAMILY_KETTLE_GTIN, tmp_path).read_bytes()).decode()
    with api_client(settings, runtime) as client:
        body = client.post("/v1/chat/completions", json={"model": "tandem", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}]}]}).json()
    info = body["tandem"]
    assert info["route"] == "catalog" and [c["id"] for c in info["products"]] == ["K1"]
    answer = body["choices"][0]["message"]["content"]
    assert f"This is **Family Electric Kettle 2.2 L** (found by its barcode {FAMILY_KETTLE_GTIN})" in answer
    logged = searches(db)[0]
    assert (logged.kind, logged.filters, logged.top_ids) == ("photo", f"barcode {FAMILY_KETTLE_GTIN}", ["K1"])


def test_a_barcode_photo_alone_in_the_chat_ui_finds_its_product_and_answers_a_field_asked(shop, settings, tmp_path):
    runtime, _, _ = shop
    reader = MediaReader(settings, upload_folders=[])
    path = barcode_photo(FAMILY_KETTLE_GTIN, tmp_path, seed=11)
    request, extraction = build_request(reader, "", [str(path)], "photo-ui-1")
    assert [p.codes for p in extraction.photos] == [[FAMILY_KETTLE_GTIN]]
    response = runtime.service.answer(request)
    assert response.route == "catalog" and [c["id"] for c in response.products] == ["K1"]
    request, _ = build_request(reader, "how many litres is this?", [str(path)], "photo-ui-2")
    response = runtime.service.answer(request)
    assert response.route == "catalog"
    assert "Family Electric Kettle 2.2 L: capacity is 2.2 L." in response.answer
    assert [(s.product_id, s.field) for s in response.sources] == [("K1", "capacity")]


def test_a_barcode_no_product_has_is_answered_honestly_with_no_product(shop, settings, tmp_path):
    runtime, db, _ = shop
    reader = MediaReader(settings, upload_folders=[])
    request, _ = build_request(reader, "", [str(barcode_photo(NOT_IN_CATALOG, tmp_path))], "photo-ui-3")
    response = runtime.service.answer(request)
    assert response.route == "catalog" and response.products == []
    assert f"I read the barcode {NOT_IN_CATALOG}, but no product in our catalog has it" in response.answer
    logged = searches(db)[0]
    assert (logged.kind, logged.results) == ("photo", 0)


def test_a_label_photo_finds_its_product_by_the_ocr_text(shop, settings, tmp_path):
    runtime, _, _ = shop
    reader = MediaReader(settings, upload_folders=[])
    request, extraction = build_request(reader, "which product is this?",
                                        [str(label_photo("Merino Wool Sweater", tmp_path))], "photo-ui-4")
    assert extraction.photos[0].codes == [] and "Merino Wool Sweater" in extraction.photos[0].text
    response = runtime.service.answer(request)
    assert response.route == "catalog" and response.products[0]["id"] in {"S1", "S2"}
    assert "found by the label's text" in response.answer


def test_a_photo_whose_label_names_no_product_is_answered_honestly(shop, settings, tmp_path):
    runtime, _, _ = shop
    reader = MediaReader(settings, upload_folders=[])
    request, _ = build_request(reader, "what is this?", [str(label_photo("Garden Hose Reel 30 m", tmp_path))],
                               "photo-ui-5")
    response = runtime.service.answer(request)
    assert response.route == "catalog" and response.products == []
    assert "I couldn't find this product from the photo: I read no barcode in it, and the label's text names none" \
        in response.answer


def test_a_photo_sent_about_the_customers_own_item_is_left_to_the_rest_of_the_chain(shop, settings, tmp_path):
    runtime, _, _ = shop
    reader = MediaReader(settings, upload_folders=[])
    request, _ = build_request(reader, "my kettle arrived broken, I want a refund",
                               [str(barcode_photo(FAMILY_KETTLE_GTIN, tmp_path))], "photo-ui-6")
    response = runtime.service.answer(request)
    assert response.route != "catalog"


def test_a_barcode_photo_sent_to_api_v1_finds_its_product_and_an_unreadable_image_is_said(shop, settings, tmp_path):
    runtime, _, _ = shop
    data = base64.b64encode(barcode_photo(FAMILY_KETTLE_GTIN, tmp_path, seed=21).read_bytes()).decode()
    with api_client(settings, runtime) as client:
        body = client.post("/api/v1/chat", json={"message": "", "images": [f"data:image/jpeg;base64,{data}"]}).json()
        bad = client.post("/api/v1/chat", json={"message": "", "images": ["data:image/png;base64,bm90IGFuIGltYWdl"]})
    assert body["route"] == "catalog" and [c["id"] for c in body["products"]] == ["K1"]
    assert f"found by its barcode {FAMILY_KETTLE_GTIN}" in body["answer"]
    assert bad.status_code == 200 and bad.json()["route"] == "guard" and bad.json()["products"] == []
    assert "is not an image I can read" in bad.json()["answer"]
