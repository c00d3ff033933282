"""Images to text: real Pillow validation and real RapidOCR on small generated files (tests/assets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from app import media
from app.media import AttachmentError

ASSETS = Path(__file__).resolve().parents[1] / "assets"


MAX_MB = 10.0


@pytest.fixture(scope="module")
def reader(settings):
    return media.MediaReader(settings)


@pytest.mark.slow
def test_ocr_reads_the_order_screenshot(reader):
    assert reader.read_image(ASSETS / "order_text.png") == "ORDER NW-104233 where is my parcel"


@pytest.mark.slow
def test_image_without_text_says_so(reader):
    with pytest.raises(AttachmentError, match="could not find any text in no_text.png"):
        reader.read_image(ASSETS / "no_text.png")


def test_text_file_renamed_png_is_not_an_image():
    with pytest.raises(AttachmentError, match="not_an_image.png is not an image I can read"):
        media.load_image(ASSETS / "not_an_image.png", MAX_MB)


def test_truncated_png_is_reported_damaged():
    with pytest.raises(AttachmentError, match="corrupt.png looks damaged"):
        media.load_image(ASSETS / "corrupt.png", MAX_MB)


def test_decompression_bomb_is_refused_before_decoding(tmp_path):
    bomb = tmp_path / "bomb.png"
    Image.new("1", (8000, 6000)).save(bomb)  # 48 MP of one colour compresses to a few kB
    assert bomb.stat().st_size < 100_000
    with pytest.raises(AttachmentError, match=r"8000x6000 pixels \(48 MP\); the limit is 40 MP"):
        media.load_image(bomb, MAX_MB)


def test_upload_over_the_size_limit():
    with pytest.raises(AttachmentError, match=r"order_text.png is \d+ kB; the limit is 0.01 MB"):
        media.load_image(ASSETS / "order_text.png", 0.01)


def test_zero_byte_image(tmp_path):
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(AttachmentError, match="empty.png is empty"):
        media.load_image(empty, MAX_MB)


@pytest.mark.parametrize("name", ["invoice.pdf", "notes.txt", "archive.zip", "no_extension"])
def test_unsupported_file_types(name):
    with pytest.raises(AttachmentError, match="not supported"):
        media.kind_of(name)


def test_kinds_by_extension():
    assert media.kind_of("Photo.JPG") == "image" and media.kind_of("voice.ogg") == "audio"


def _box(left, right, top, bottom, text):
    return [[[left, top], [right, top], [right, bottom], [left, bottom]], text, 0.99]


def test_ocr_text_cuts_glyph_echo_of_overlapping_boxes():
    # What RapidOCR returned for the order screenshot before clean-up: "is" and "6 my parcel" overlap.
    boxes = [_box(39, 472, 47, 83, "ORDER NW-104233"), _box(480, 625, 50, 83, "where"),
             _box(630, 677, 50, 82, "is"), _box(659, 913, 46, 96, "6 my parcel")]
    assert media.ocr_text(boxes) == "ORDER NW-104233 where is my parcel"


def test_ocr_text_keeps_lines_in_reading_order():
    boxes = [_box(10, 200, 100, 130, "second line"), _box(300, 400, 10, 40, "right"),
             _box(10, 200, 12, 42, "first left")]
    assert media.ocr_text(boxes) == "first left right\nsecond line"
