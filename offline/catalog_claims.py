"""The catalog eval's claim check: every product name, price and attribute value in a served catalog answer must be
found in a catalog record. A claim that matches no record is reported with what it claimed.

It reads the answer's text as the customer reads it (catalog/reply.py's markdown), in the spots where the answer
names products and states their facts:

* card lines ("1. **[Title](link)** — $39.92 (was $49.90) · in stock"): the title is a record's title, and the line's
  prices and availability are that record's;
* bold names and the comparison table's header: each a record's title (or its title without the variant suffix);
* fact lines ("- Title: capacity is 1.7 L. (source: product ID, field `capacity`)", and the Chinese form): the value
  is the cited record's value of that field;
* comparison rows ("| capacity | 1.7 L | not stated |"): each cell is its column's record's value, or "not stated"
  where the record lacks the field;
* stock answers ("X does not come in Pink; it comes in Blue, Grey; sizes M, L."): the product is named by a record,
  and the colours and sizes listed are its variants';
* any other price ($12.34, "12.34 USD", ¥12, 12元): some record's price or sale price, or a number the customer wrote
  (the filter chips repeat the customer's own bounds: "under $50").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from catalog.constraints import chinese_number
from catalog.reply import AVAILABILITY
from catalog.store import CatalogProduct

_PRICE = re.compile(r"\$\s?(\d[\d,]*(?:\.\d+)?)|(\d[\d,]*(?:\.\d+)?)\s?(?:USD|CNY|元|美元)|[¥￥]\s?(\d[\d,]*(?:\.\d+)?)")
_CARD = re.compile(r"^\d+\.\s+\*\*(?:\[(?P<linked>.+?)\]\(.*?\)|(?P<plain>.+?))\*\*\s+—\s+(?P<prices>.+?)\s+·\s+"
                   r"(?P<stock>.+)$")
_BOLD = re.compile(r"\*\*(?:\[(.+?)\]\(.*?\)|(.+?))\*\*")
_FACT_EN = re.compile(r"^- (?P<title>.+?): (?P<field>.+?) is (?P<value>.+)\. \(source: product (?P<id>\S+), field `"
                      r"(?P<name>.+?)`\)$")
_FACT_ZH = re.compile(r"^- (?P<title>.+)的(?P<label>[^的]+?)：(?P<value>.+)（来源：(?P<id>[^，]+)，字段 (?P<name>.+)）$")
_NOT_STATED = re.compile(r"^- (?:(?P<en>.+?): the product record does not state|商品资料未注明(?P<zh>.+)的[^的]+。$|"
                         r"商品资料中没有回答这个问题的信息（(?P<zh2>.+)）。$)")
_STOCK_EN = re.compile(r"^(?P<name>.+?) (?:does not come in .+?; it comes in (?P<comes>.+)\.|comes in .+)$")
_STOCK_ZH = re.compile(r"^(?P<name>.+?)(?:没有.+?；可选：(?P<comes>.+)。|有.+?，(?:有货|但目前缺货)。)$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?|[零〇一二两三四五六七八九十百千万]+")
_LABELS = {"**Filters:**", "**筛选：**"}


@dataclass
class ClaimCheck:
    """The unmatched claims of one answer: (kind, what was claimed); kind is name, price, availability or value."""

    claims: int = 0
    unmatched: list[tuple[str, str]] = field(default_factory=list)


class ClaimChecker:
    """Checks answers against the catalog's records (the products of :attr:`catalog.store.Catalog.products`)."""

    def __init__(self, products: Iterable[CatalogProduct]):
        self.products = list(products)
        self.by_id = {p.id: p for p in self.products}
        self.by_title: dict[str, list[CatalogProduct]] = {}
        for p in self.products:
            names = {p.title, p.title.split(" - ")[0], p.title_zh}
            for name in filter(None, names):
                self.by_title.setdefault(name.strip(), []).append(p)
        self.prices = {round(v, 2) for p in self.products for v in (p.price, p.sale_price) if v is not None}

    # ---- the answer ------------------------------------------------------------------------------------------
    def check(self, text: str, message: str = "") -> ClaimCheck:
        result = ClaimCheck()
        said = _numbers(message)
        table: list[str] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line:
                continue
            if line.startswith("|"):
                table.append(line)
                continue
            if table:
                self._table(table, result)
                table = []
            self._line(line, said, result)
        if table:
            self._table(table, result)
        return result

    def _line(self, line: str, said: set[float], result: ClaimCheck) -> None:
        if any(line.startswith(label) for label in _LABELS):  # the customer's own constraints, repeated
            return
        card = _CARD.match(line)
        if card:
            self._card(card, result)
            return
        fact = _FACT_EN.match(line) or _FACT_ZH.match(line)
        if fact:
            self._fact(fact, result)
            return
        absent = _NOT_STATED.match(line)
        if absent:
            self._name(next(g for g in absent.groups() if g), result)
            return
        stock = _STOCK_EN.match(line) or _STOCK_ZH.match(line)
        if stock and self._known(stock["name"]):
            self._stock(stock, result)
            return
        for linked, plain in _BOLD.findall(line):
            self._name(linked or plain, result)
        for value in _prices(line):
            result.claims += 1
            if value not in self.prices and value not in said:
                result.unmatched.append(("price", _money(value)))

    # ---- the spots -------------------------------------------------------------------------------------------
    def _known(self, name: str) -> list[CatalogProduct]:
        return self.by_title.get(name.strip(), [])

    def _name(self, name: str, result: ClaimCheck) -> list[CatalogProduct]:
        result.claims += 1
        found = self._known(name)
        if not found:
            result.unmatched.append(("name", name.strip()))
        return found

    def _card(self, card: re.Match, result: ClaimCheck) -> None:
        found = self._name(card["linked"] or card["plain"], result)
        allowed = {round(v, 2) for p in found for v in (p.price, p.sale_price) if v is not None}
        for value in _prices(card["prices"]):
            result.claims += 1
            if value not in allowed:
                result.unmatched.append(("price", f"{_money(value)} for {card['linked'] or card['plain']}"))
        result.claims += 1
        states = {label for p in found for label in AVAILABILITY.get(p.availability, (p.availability,) * 2)}
        if found and card["stock"].strip() not in states:
            result.unmatched.append(("availability", f"{card['stock'].strip()} for {card['linked'] or card['plain']}"))

    def _fact(self, fact: re.Match, result: ClaimCheck) -> None:
        self._name(fact["title"], result)
        result.claims += 1
        product = self.by_id.get(fact["id"])
        stated = product.field_value(fact["name"]) if product is not None else ""
        if not stated or stated.strip() != fact["value"].strip():
            result.unmatched.append(("value", f"{fact['name']} = {fact['value']} for {fact['id']}"))

    def _table(self, lines: list[str], result: ClaimCheck) -> None:
        rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
        header, body = rows[0], [r for r in rows[1:] if not all(set(c) <= {"-", ":"} for c in r)]
        columns = [self._name(title, result) for title in header[1:]]
        for row in body:
            name, cells = row[0], row[1:]
            for products, cell in zip(columns, cells):
                result.claims += 1
                values = {p.field_value(name) for p in products}
                if not products or not (cell in values or (cell == "not stated" and "" in values)):
                    result.unmatched.append(("value", f"{name} = {cell}"))

    def _stock(self, stock: re.Match, result: ClaimCheck) -> None:
        found = self._name(stock["name"], result)
        if not stock["comes"]:
            return
        groups = {p.group for p in found}
        variants = [p for p in self.products if p.group in groups]
        colours, sizes = {p.color for p in variants}, {p.size for p in variants}
        for part in re.split(r";|；", stock["comes"]):
            part = part.strip()
            is_size = part.startswith(("sizes ", "尺码 "))
            values = part.split(" ", 1)[1] if is_size else part
            for value in filter(None, (v.strip() for v in values.split(","))):
                result.claims += 1
                if value not in (sizes if is_size else colours):
                    result.unmatched.append(("value", f"{'size' if is_size else 'colour'} {value}"))


def _prices(text: str) -> list[float]:
    return [round(float(next(g for g in m.groups() if g).replace(",", "")), 2) for m in _PRICE.finditer(text)]


def _numbers(message: str) -> set[float]:
    """The numbers the customer wrote, Chinese numerals too ("两百" is 200)."""
    out: set[float] = set()
    for token in _NUMBER.findall(message):
        value = float(token) if token[0].isdigit() else chinese_number(token)
        if value is not None:
            out.add(round(float(value), 2))
    return out


def _money(value: float) -> str:
    return f"${value:.2f}"
