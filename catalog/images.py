"""Product pictures and barcode images rendered locally (PIL), for a catalog whose feed links to pictures that do not
exist (the demo's northwind.example addresses): a card still has a picture, and a product's GTIN has a barcode image
that a photo look-up can be tested against.

Files go under ``<folder>/images/<product id>.png`` and ``<folder>/barcodes/<gtin>.png``; ``tandem catalog ingest``
renders them into ``$TANDEM_HOME/catalog``. A file already there is kept unless ``force``.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from pathlib import Path

# EAN-13 symbol tables (GS1 General Specifications): the left half's digits in code set A (odd parity) or B (even),
# chosen by the first digit; the right half in code set C (set A's complement).
_SET_A = ("0001101", "0011001", "0010011", "0111101", "0100011", "0110001", "0101111", "0111011", "0110111", "0001011")
_SET_C = tuple("".join("1" if b == "0" else "0" for b in code) for code in _SET_A)
_SET_B = tuple(code[::-1] for code in _SET_C)
_PARITY = ("AAAAAA", "AABABB", "AABBAB", "AABBBA", "ABAABB", "ABBAAB", "ABBBAB", "ABABAB", "ABABBA", "ABBABA")
QUIET = 11  # modules of white on each side (the spec's minimum on the left)
COLOURS = {"black": (40, 40, 44), "white": (236, 236, 232), "grey": (150, 152, 156), "silver": (192, 194, 198),
           "blue": (70, 110, 180), "navy": (36, 52, 92), "red": (186, 58, 52), "green": (82, 140, 92),
           "olive": (118, 124, 64), "pink": (226, 160, 176), "cream": (238, 226, 198), "natural": (214, 196, 160),
           "brass": (190, 160, 90), "charcoal": (70, 72, 76), "yellow": (232, 196, 64), "beige": (214, 198, 170),
           "brown": (120, 84, 56), "clear": (214, 232, 236)}


def ean13_modules(gtin: str) -> str:
    """The 95 modules ("1" = bar) of an EAN-13 (a 12-digit UPC-A is drawn as EAN-13 with a leading 0)."""
    if len(gtin) == 12:
        gtin = "0" + gtin
    if not re.fullmatch(r"\d{13}", gtin):
        raise ValueError(f"'{gtin}' is not a 13-digit EAN")
    digits = [int(d) for d in gtin]
    parity = _PARITY[digits[0]]
    left = "".join((_SET_A if p == "A" else _SET_B)[d] for p, d in zip(parity, digits[1:7]))
    right = "".join(_SET_C[d] for d in digits[7:])
    return "101" + left + "01010" + right + "101"


def render_barcode(gtin: str, path: Path, module_px: int = 3, height_px: int = 120) -> Path:
    """An EAN-13 barcode image with its digits under the bars."""
    from PIL import Image, ImageDraw

    modules = ean13_modules(gtin)
    width = (len(modules) + 2 * QUIET) * module_px
    image = Image.new("L", (width, height_px + 28), 255)
    draw = ImageDraw.Draw(image)
    for i, bit in enumerate(modules):
        if bit == "1":
            x = (QUIET + i) * module_px
            draw.rectangle([x, 8, x + module_px - 1, 8 + height_px], fill=0)
    draw.text((QUIET * module_px, height_px + 12), " ".join([gtin[0], gtin[1:7], gtin[7:]]), fill=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


def render_picture(product, path: Path, size: int = 360) -> Path:
    """A plain product picture: the product's colour as a swatch, its title and category."""
    from PIL import Image, ImageDraw

    colour = COLOURS.get((product.color or "").lower(), (200, 200, 204))
    image = Image.new("RGB", (size, size), (248, 247, 244))
    draw = ImageDraw.Draw(image)
    margin = size // 8
    draw.rounded_rectangle([margin, margin, size - margin, size - margin - 70], radius=24, fill=colour,
                           outline=(60, 60, 60), width=2)
    lines = textwrap.wrap(product.title, width=40)[:3] + [product.product_type.split(">")[-1].strip()]
    for n, line in enumerate(lines):
        draw.text((margin, size - margin - 58 + n * 14), line, fill=(30, 30, 30))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


def render_all(products: Iterable, folder: Path, force: bool = False) -> tuple[int, int]:
    """Render every product's picture and barcode that is not there yet; (pictures, barcodes) written."""
    pictures = barcodes = 0
    for product in products:
        picture = folder / "images" / f"{_safe(product.id)}.png"
        if force or not picture.exists():
            render_picture(product, picture)
            pictures += 1
        gtin = product.gtin or ""
        if len(gtin) in (12, 13):
            barcode = folder / "barcodes" / f"{gtin}.png"
            if force or not barcode.exists():
                render_barcode(gtin, barcode)
                barcodes += 1
    return pictures, barcodes


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)
