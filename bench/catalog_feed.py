"""Synthetic product feeds for the catalog bench, in the Merchant Center format: the demo catalog
(catalog/demo/catalog.tsv, 156 products) varied into as many products as asked.

Each copy of a demo product gets a new id, a product line's name in front of its title ("Harbor Electric Kettle 1.7 L
- Blue"), a new colour (its title's colour suffix follows), a price drawn around the original, a new GTIN-13 with a
valid check digit and its own item group. Descriptions, categories, attributes and the Chinese columns are the demo
product's, so the bench's messages parse as they do on the demo shop. The first 156 rows are the demo catalog itself.
Seeded: the same size always writes the same file.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from catalog.feed import gtin_check_digit

DEMO_FEED = Path(__file__).resolve().parent.parent / "catalog" / "demo" / "catalog.tsv"
LINES = ("Harbor", "Alder", "Juniper", "Summit", "Meadow", "Cobalt", "Linden", "Aspen", "Willow", "Granite", "Maple",
         "Cedar", "Orchard", "Fjord", "Prairie", "Canyon", "Tundra", "Lagoon", "Sierra", "Beacon", "Ember", "Marlow",
         "Harlow", "Kestrel", "Sparrow", "Heron", "Osprey", "Falcon", "Wren", "Finch", "Robin", "Lark", "Bramble",
         "Thistle", "Clover", "Fern", "Moss", "Pebble", "Dune", "Coral", "Drift", "Tide", "Breeze", "Frost", "Glacier",
         "Solstice", "Equinox", "Nova", "Orbit", "Comet", "Zenith", "Horizon", "Vista", "Haven", "Hearth", "Cottage",
         "Loft", "Studio", "Atelier", "Foundry", "Mill", "Forge", "Quarry", "Harvest", "Acorn")
COLOURS = ("White", "Black", "Blue", "Grey", "Green", "Navy", "Cream", "Natural", "Red", "Silver", "Olive", "Beige",
           "Charcoal", "Pink", "Yellow", "Brown")


def demo_rows(path: Path = DEMO_FEED) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        return list(reader.fieldnames or []), list(reader)


def synthetic_rows(count: int, seed: int = 59) -> tuple[list[str], list[dict[str, str]]]:
    """``count`` products: the demo catalog, then varied copies of it (see the module's docstring)."""
    header, demo = demo_rows()
    rng = random.Random(seed)
    rows: list[dict[str, str]] = []
    for n in range(count):
        base = demo[n % len(demo)]
        copy = n // len(demo)
        if copy == 0:
            rows.append(dict(base))
            continue
        line = LINES[(copy - 1) % len(LINES)] + ("" if copy <= len(LINES) else f" {copy // len(LINES) + 1}")
        row = dict(base)
        colour = rng.choice(COLOURS)
        title = base["title"].split(" - ")
        if base["color"] and len(title) > 1:  # "Electric Kettle 1.7 L - Silver": the suffix names the colour
            title[-1] = title[-1].replace(base["color"], colour)
            row["color"] = colour
        row["title"] = f"{line} {' - '.join(title)}"
        row["title_zh"] = f"{line} {base['title_zh']}" if base.get("title_zh") else ""
        row["id"] = f"{base['id']}-V{copy}"
        row["item_group_id"] = f"{base['item_group_id']}-v{copy}"
        row["mpn"] = f"SYN-{n:06d}"
        body = f"21{n:010d}"
        row["gtin"] = body + gtin_check_digit(body)
        price = float(base["price"].split()[0]) * rng.uniform(0.6, 1.6)
        row["price"] = f"{max(1.0, round(price) - 0.1):.2f} USD"
        row["sale_price"] = (f"{float(row['price'].split()[0]) * 0.8:.2f} USD" if base["sale_price"] and
                             rng.random() < 0.5 else "")
        row["availability"] = rng.choices(("in_stock", "out_of_stock", "backorder"), (0.88, 0.09, 0.03))[0]
        row["link"] = f"{base['link'].split('?')[0]}?line={copy}"
        rows.append(row)
    return header, rows


def write_feed(path: Path, rows: list[dict[str, str]], header: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def synthetic_feed(count: int, path: Path, seed: int = 59) -> Path:
    """Write a feed of ``count`` products to ``path``."""
    header, rows = synthetic_rows(count, seed)
    return write_feed(path, rows, header)
