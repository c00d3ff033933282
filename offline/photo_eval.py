"""Product photos with a visible barcode: how many does the photo look-up read back to their product's GTIN?

The set is made here, at run time, never committed: each product's EAN-13 (catalog/images.py's rendering) pasted onto
a product-coloured background, then, seeded per image, scaled, turned (up to 40 degrees either way), shot at an
angle (a perspective warp moving each corner by up to 12% of the side), blurred (Gaussian, radius 0.3-1.6 px), lit
unevenly (brightness and contrast), given sensor noise and saved as JPEG (quality 35-85). Each is read with
:func:`app.media.read_barcodes` (zxing-cpp) exactly as a chat attachment is.

    .venv/bin/python -m offline.photo_eval                 # the demo catalog's products, one photo each
    .venv/bin/python -m offline.photo_eval --per-product 2 --json
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from catalog.feed import read_feed
from catalog.images import COLOURS, render_barcode

DEMO_FEED = Path(__file__).resolve().parents[1] / "catalog" / "demo" / "catalog.tsv"


@dataclass
class PhotoResult:
    total: int = 0
    found: int = 0
    misses: list[dict] = field(default_factory=list)  # {"gtin", "seed", "read"}

    @property
    def share(self) -> float:
        return self.found / self.total if self.total else 0.0


def _coeffs(source: list[tuple[float, float]], target: list[tuple[float, float]]) -> list[float]:
    """PIL's PERSPECTIVE coefficients mapping output points ``target`` to input points ``source``."""
    import numpy as np

    rows = []
    for (x, y), (u, v) in zip(target, source):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
    a = np.asarray(rows, dtype=float)
    b = np.asarray([c for point in source for c in point], dtype=float)
    return [float(c) for c in np.linalg.solve(a, b)]


def photo_of(barcode, seed: int, colour: tuple[int, int, int] = (200, 200, 204)):
    """A photo-like RGB image of ``barcode`` (a PIL image), distorted as the module's docstring says, by ``seed``."""
    import numpy as np
    from PIL import Image, ImageEnhance, ImageFilter

    rng = random.Random(seed)
    code = barcode.convert("RGB")
    scale = rng.uniform(0.8, 1.4)
    code = code.resize((int(code.width * scale), int(code.height * scale)), Image.Resampling.BILINEAR)
    side = int(max(code.size) * 1.6)
    canvas = Image.new("RGB", (side, side), colour)
    canvas.paste(code, ((side - code.width) // 2, (side - code.height) // 2))
    canvas = canvas.rotate(rng.uniform(-40, 40), resample=Image.Resampling.BICUBIC, fillcolor=colour)
    w, h = canvas.size
    corners: list[tuple[float, float]] = [(0, 0), (w, 0), (w, h), (0, h)]
    moved = [(x + rng.uniform(-0.12, 0.12) * w, y + rng.uniform(-0.12, 0.12) * h) for x, y in corners]
    canvas = canvas.transform((w, h), Image.Transform.PERSPECTIVE, _coeffs(corners, moved),
                              resample=Image.Resampling.BICUBIC, fillcolor=colour)
    canvas = canvas.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.6)))
    canvas = ImageEnhance.Brightness(canvas).enhance(rng.uniform(0.7, 1.2))
    canvas = ImageEnhance.Contrast(canvas).enhance(rng.uniform(0.6, 1.1))
    pixels = np.asarray(canvas, dtype=np.float32)
    pixels += np.random.default_rng(seed).normal(0, rng.uniform(2, 10), pixels.shape)
    canvas = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    buffer = io.BytesIO()
    canvas.save(buffer, "JPEG", quality=rng.randint(35, 85))
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def photo_set(feed: Path = DEMO_FEED, per_product: int = 1, limit: int | None = None, folder: Path | None = None):
    """(gtin, seed, photo) for the feed's products with a 12/13-digit GTIN; saved under ``folder`` when given."""
    from PIL import Image

    products = [p for p in read_feed(feed).products if len(p.gtin) in (12, 13)][:limit]
    with tempfile.TemporaryDirectory() as tmp:
        for n, product in enumerate(products):
            barcode = Image.open(render_barcode(product.gtin, Path(tmp) / f"{product.gtin}.png"))
            for k in range(per_product):
                seed = n * 100 + k
                image = photo_of(barcode, seed, COLOURS.get(product.color.lower(), (200, 200, 204)))
                if folder is not None:
                    folder.mkdir(parents=True, exist_ok=True)
                    image.save(folder / f"{product.gtin}-{seed}.jpg")
                yield product.gtin, seed, image


def measure(feed: Path = DEMO_FEED, per_product: int = 1, limit: int | None = None) -> PhotoResult:
    from app.media import read_barcodes

    result = PhotoResult()
    for gtin, seed, image in photo_set(feed, per_product, limit):
        read = read_barcodes(image)
        result.total += 1
        if any(code.lstrip("0") == gtin.lstrip("0") for code in read):
            result.found += 1
        else:
            result.misses.append({"gtin": gtin, "seed": seed, "read": read})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feed", type=Path, default=DEMO_FEED)
    parser.add_argument("--per-product", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.feed, args.per_product)
    if args.json:
        print(json.dumps({"photos": result.total, "found": result.found, "share": round(result.share, 4),
                          "misses": result.misses}))
    else:
        print(f"{result.found}/{result.total} barcode photos found ({result.share:.1%})")
        for miss in result.misses:
            print(f"  missed {miss['gtin']} (seed {miss['seed']}): read {miss['read'] or 'nothing'}")
    return 0 if result.share >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
