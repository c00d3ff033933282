"""Pictures and EAN-13 barcode images rendered locally: the bars read back from the image's pixels decode to the GTIN."""

from __future__ import annotations

from pathlib import Path

from catalog.feed import read_feed
from catalog.images import QUIET, ean13_modules, render_all, render_barcode
from tests.catalog.shop import write_feed

# EAN-13 left-half code set A (odd parity); set B is set A's complement reversed; the right half is the complement.
# Written out again here, from the GS1 table, so the test does not read the renderer's own tables.
SET_A = {"0001101": 0, "0011001": 1, "0010011": 2, "0111101": 3, "0100011": 4, "0110001": 5, "0101111": 6,
         "0111011": 7, "0110111": 8, "0001011": 9}
FIRST_DIGIT = {"AAAAAA": 0, "AABABB": 1, "AABBAB": 2, "AABBBA": 3, "ABAABB": 4, "ABBAAB": 5, "ABBBAB": 6, "ABABAB": 7,
               "ABABBA": 8, "ABBABA": 9}


def _flip(code: str) -> str:
    return "".join("1" if b == "0" else "0" for b in code)


def decode(modules: str) -> str:
    assert len(modules) == 95 and modules[:3] == "101" and modules[45:50] == "01010" and modules[-3:] == "101"
    left, right = modules[3:45], modules[50:92]
    digits, parity = [], ""
    for i in range(6):
        code = left[i * 7:i * 7 + 7]
        if code in SET_A:
            digits.append(SET_A[code])
            parity += "A"
        else:
            digits.append(SET_A[_flip(code[::-1])])
            parity += "B"
    digits += [SET_A[_flip(right[i * 7:i * 7 + 7])] for i in range(6)]
    return str(FIRST_DIGIT[parity]) + "".join(map(str, digits))


def read_bars(path: Path, module_px: int = 3) -> str:
    from PIL import Image

    image = Image.open(path).convert("L")
    y = 40
    return "".join("1" if image.getpixel(((QUIET + i) * module_px + 1, y)) < 128 else "0" for i in range(95))


def test_a_rendered_barcode_decodes_to_its_gtin(tmp_path):
    for gtin in ("4006381333931", "2000000000015", "9780306406157"):
        path = render_barcode(gtin, tmp_path / f"{gtin}.png")
        assert decode(read_bars(path)) == gtin
    assert ean13_modules("036000291452") == ean13_modules("0036000291452")  # UPC-A as EAN-13


def test_every_product_gets_a_picture_and_a_barcode_once(tmp_path):
    products = read_feed(write_feed(tmp_path / "feed.tsv")).products
    assert render_all(products, tmp_path / "out") == (len(products), len(products))
    assert render_all(products, tmp_path / "out") == (0, 0)
    assert sorted(p.name for p in (tmp_path / "out" / "images").iterdir()) == sorted(f"{p.id}.png" for p in products)
    assert all(decode(read_bars(tmp_path / "out" / "barcodes" / f"{p.gtin}.png")) == p.gtin for p in products)
