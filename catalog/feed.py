"""Reading a product feed into :class:`ProductRecord` rows: the Google Merchant Center product data format
(tab-separated or CSV, the spec's field names) or Shopify's product CSV export. A row that cannot be used is
reported with its line number and the reason; the good rows are still read.

Merchant Center fields read: id, title, description, link, image_link, price ("15.00 USD"), sale_price,
availability (in_stock, out_of_stock, preorder, backorder; the older "in stock" spelling too), brand, gtin, mpn,
color, size, material, pattern, product_type ("Home > Bedding > Blankets"), item_group_id, and product_detail as
``section:attribute:value`` items separated by commas. Tandem's own optional columns carry the Chinese text:
title_zh, description_zh and product_type_zh (the Chinese category path, same depth as product_type).
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

AVAILABILITY = ("in_stock", "out_of_stock", "preorder", "backorder")
_PRICE = re.compile(r"^\s*([0-9]+(?:[.,][0-9]{1,2})?)\s*([A-Za-z]{3})?\s*$")
_TAG = re.compile(r"<[^>]+>")
# Fields whose text is embedded and indexed: a change to any of them re-embeds the product, a change to any other
# (price, stock, links) does not.
TEXT_FIELDS = ("title", "description", "title_zh", "description_zh", "product_type", "product_type_zh", "brand",
               "color", "size", "material", "pattern")


@dataclass
class ProductRecord:
    """One product (one variant) as the feed states it; empty strings are fields the feed left out."""

    id: str
    title: str
    price: float
    currency: str = "USD"
    description: str = ""
    link: str = ""
    image_link: str = ""
    sale_price: float | None = None
    availability: str = "in_stock"
    brand: str = ""
    gtin: str = ""
    mpn: str = ""
    color: str = ""
    size: str = ""
    material: str = ""
    pattern: str = ""
    product_type: str = ""
    product_type_zh: str = ""
    item_group_id: str = ""
    title_zh: str = ""
    description_zh: str = ""
    # product_detail attribute name -> value (the section is kept in ``sections``)
    attributes: dict[str, str] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def category(self) -> str:
        """The product_type's leaf ("Home > Bedding > Blankets" -> "Blankets")."""
        return self.product_type.split(">")[-1].strip()

    @property
    def category_zh(self) -> str:
        return self.product_type_zh.split(">")[-1].strip()

    def text_hash(self) -> str:
        """What the embedded and indexed text depends on."""
        parts = [getattr(self, name) for name in TEXT_FIELDS] + [json.dumps(self.attributes, sort_keys=True)]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]

    def data_hash(self) -> str:
        """Everything the feed says about the product: any change is an update."""
        data = {k: v for k, v in self.__dict__.items() if k != "line"}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:24]


@dataclass
class BadRow:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class Feed:
    products: list[ProductRecord]
    bad: list[BadRow]
    format: str  # "merchant" or "shopify"
    # ids named by bad rows: `--replace` keeps these products rather than delete them over a typo in the feed
    bad_ids: set[str] = field(default_factory=set)


def parse_price(text: str) -> tuple[float, str]:
    """"15.00 USD" -> (15.0, "USD"); a bare number takes no currency (""). Raises ValueError."""
    match = _PRICE.match(text or "")
    if not match:
        raise ValueError(f"price '{text}' is not a number with an optional currency code (e.g. 15.00 USD)")
    return float(match.group(1).replace(",", ".")), (match.group(2) or "").upper()


def gtin_valid(gtin: str) -> bool:
    """GTIN-8/12/13/14 with a correct check digit (GS1 mod-10)."""
    if not gtin.isdigit() or len(gtin) not in (8, 12, 13, 14):
        return False
    digits = [int(d) for d in gtin]
    body, check = digits[:-1], digits[-1]
    total = sum(d * (3 if i % 2 == 0 else 1) for i, d in enumerate(reversed(body)))
    return (10 - total % 10) % 10 == check


def gtin_check_digit(body: str) -> str:
    """The check digit that completes ``body`` (a GTIN without its last digit)."""
    total = sum(int(d) * (3 if i % 2 == 0 else 1) for i, d in enumerate(reversed(body)))
    return str((10 - total % 10) % 10)


def parse_product_detail(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """``section:attribute:value`` items separated by commas -> (attribute -> value, attribute -> section).
    A value may contain colons; a piece without two colons continues the previous value (a comma inside a value),
    and is an error only when it comes first."""
    attributes: dict[str, str] = {}
    sections: dict[str, str] = {}
    last = ""
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        pieces = item.split(":", 2)
        if len(pieces) != 3 or not pieces[1].strip() or not pieces[2].strip():
            if last:  # a value with a comma in it ("E27, max 40 W"): the piece continues the previous value
                attributes[last] += f", {item}"
                continue
            raise ValueError(f"product_detail item '{item}' is not section:attribute:value")
        last = pieces[1].strip()
        name = pieces[1].strip()
        attributes[name] = pieces[2].strip()
        sections[name] = pieces[0].strip()
    return attributes, sections


def _dialect(first_line: str, path: Path) -> str:
    return "\t" if "\t" in first_line or path.suffix.lower() in (".tsv", ".txt") else ","


def read_feed(path: Path, default_currency: str = "USD") -> Feed:
    """Parse a Merchant Center or Shopify feed file; the format is told by its header."""
    text = path.read_text(encoding="utf-8-sig")
    reader = csv.reader(io.StringIO(text), delimiter=_dialect(text.split("\n", 1)[0], path))
    # line_num counts physical lines and a quoted field may span several: a row starts one after the previous end
    numbered: list[tuple[int, list[str]]] = []
    previous = 0
    for cells in reader:
        numbered.append((previous + 1, cells))
        previous = reader.line_num
    if not numbered:
        return Feed([], [BadRow(1, "the file is empty")], "merchant")
    header = [h.strip() for h in numbered[0][1]]
    body = numbered[1:]
    if "Handle" in header:
        return _shopify(header, body, default_currency)
    return _merchant([h.lower() for h in header], body, default_currency)


def _merchant(header: list[str], body: list[tuple[int, list[str]]], default_currency: str) -> Feed:
    feed = Feed([], [], "merchant")
    missing = [name for name in ("id", "title", "price") if name not in header]
    if missing:
        feed.bad.append(BadRow(1, f"the header lacks the required column(s) {', '.join(missing)}"))
        return feed
    seen: dict[str, int] = {}
    for line, cells in body:
        if not any(c.strip() for c in cells):
            continue
        row = {name: (cells[i].strip() if i < len(cells) else "") for i, name in enumerate(header)}
        try:
            record = _merchant_record(row, line, default_currency)
        except ValueError as exc:
            feed.bad.append(BadRow(line, str(exc)))
            if row.get("id"):
                feed.bad_ids.add(row["id"])
            continue
        if record.id in seen:
            feed.bad.append(BadRow(line, f"id '{record.id}' repeats line {seen[record.id]}"))
            continue
        seen[record.id] = line
        feed.products.append(record)
    return feed


def _merchant_record(row: dict[str, str], line: int, default_currency: str) -> ProductRecord:
    if not row.get("id"):
        raise ValueError("id is empty")
    if not row.get("title"):
        raise ValueError(f"product {row['id']}: title is empty")
    price, currency = parse_price(row.get("price", ""))
    sale = None
    if row.get("sale_price"):
        sale, sale_currency = parse_price(row["sale_price"])
        if sale_currency and currency and sale_currency != currency:
            raise ValueError(f"product {row['id']}: sale_price is in {sale_currency}, price in {currency}")
    availability = (row.get("availability") or "in_stock").lower().replace(" ", "_")
    if availability not in AVAILABILITY:
        raise ValueError(f"product {row['id']}: availability '{row['availability']}' is not one of {', '.join(AVAILABILITY)}")
    gtin = row.get("gtin", "")
    if gtin and not gtin_valid(gtin):
        raise ValueError(f"product {row['id']}: gtin '{gtin}' is not a GTIN-8/12/13/14 with a valid check digit")
    attributes, sections = parse_product_detail(row.get("product_detail", ""))
    return ProductRecord(
        id=row["id"], title=row["title"], price=price, currency=currency or default_currency,
        description=row.get("description", ""), link=row.get("link", ""), image_link=row.get("image_link", ""),
        sale_price=sale, availability=availability, brand=row.get("brand", ""), gtin=gtin, mpn=row.get("mpn", ""),
        color=row.get("color", ""), size=row.get("size", ""), material=row.get("material", ""),
        pattern=row.get("pattern", ""), product_type=row.get("product_type", ""),
        product_type_zh=row.get("product_type_zh", ""), item_group_id=row.get("item_group_id", ""),
        title_zh=row.get("title_zh", ""), description_zh=row.get("description_zh", ""),
        attributes=attributes, sections=sections, line=line)


# Shopify option names that are Merchant Center fields; any other option becomes an attribute.
_SHOPIFY_OPTIONS = {"color": "color", "colour": "color", "size": "size", "material": "material", "pattern": "pattern"}


def _shopify(header: list[str], body: list[tuple[int, list[str]]], default_currency: str) -> Feed:
    """Shopify's export: one row per variant; the product's own columns (Title, Body (HTML), Vendor, Type) and the
    option names are filled on its first row only."""
    feed = Feed([], [], "shopify")
    parents: dict[str, dict[str, str]] = {}
    counts: dict[str, int] = {}
    seen: dict[str, int] = {}
    for line, cells in body:
        if not any(c.strip() for c in cells):
            continue
        row = {name: (cells[i].strip() if i < len(cells) else "") for i, name in enumerate(header)}
        handle = row.get("Handle", "")
        if not handle:
            feed.bad.append(BadRow(line, "Handle is empty"))
            continue
        if row.get("Title"):
            parents[handle] = row
        parent = parents.get(handle)
        if parent is None:
            feed.bad.append(BadRow(line, f"variant of '{handle}' comes before the row with its Title"))
            continue
        if not row.get("Variant Price"):
            continue  # an extra image row: Shopify writes one per additional picture
        counts[handle] = counts.get(handle, 0) + 1
        product_id = row.get("Variant SKU") or f"{handle}-{counts[handle]}"
        try:
            price, _ = parse_price(row["Variant Price"])
            sale = None
            compare = row.get("Variant Compare At Price", "")
            if compare:  # Shopify's compare-at price is the regular price; the variant price is then the sale price
                regular, _ = parse_price(compare)
                if regular > price:
                    price, sale = regular, price
            barcode = row.get("Variant Barcode", "").lstrip("'")
            if barcode and not gtin_valid(barcode):
                raise ValueError(f"Variant Barcode '{barcode}' is not a GTIN with a valid check digit")
            qty_text = row.get("Variant Inventory Qty", "")
            if qty_text and not re.fullmatch(r"-?\d+", qty_text):
                raise ValueError(f"Variant Inventory Qty '{qty_text}' is not a whole number")
        except ValueError as exc:
            feed.bad.append(BadRow(line, f"product {product_id}: {exc}"))
            feed.bad_ids.add(product_id)
            continue
        if product_id in seen:
            feed.bad.append(BadRow(line, f"id '{product_id}' repeats line {seen[product_id]}"))
            continue
        seen[product_id] = line
        fields: dict[str, str] = {}
        attributes: dict[str, str] = {}
        options = []
        for n in (1, 2, 3):
            name = parent.get(f"Option{n} Name", "")
            value = row.get(f"Option{n} Value", "")
            if not name or not value or value == "Default Title":
                continue
            options.append(value)
            if name.lower() in _SHOPIFY_OPTIONS:
                fields[_SHOPIFY_OPTIONS[name.lower()]] = value
            else:
                attributes[name] = value
        title = parent["Title"] + (f" - {' / '.join(options)}" if options else "")
        available = "in_stock" if not qty_text or int(qty_text) > 0 else "out_of_stock"
        feed.products.append(ProductRecord(
            id=product_id, title=title, price=price, currency=default_currency, sale_price=sale,
            description=" ".join(html.unescape(_TAG.sub(" ", parent.get("Body (HTML)", ""))).split()),
            link=f"/products/{handle}",
            image_link=row.get("Variant Image") or row.get("Image Src") or parent.get("Image Src", ""),
            availability=available, brand=parent.get("Vendor", ""), gtin=barcode, mpn=row.get("Variant SKU", ""),
            product_type=parent.get("Type", ""), item_group_id=handle, attributes=attributes,
            sections={name: "Options" for name in attributes}, line=line, **fields))
    return feed
