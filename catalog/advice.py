"""Advice on products: the candidates an LLM may advise on, their records as its context, and the check of its claims.

"Which kettle is best for a family of five?", "a gift under $50", "is the wool blanket good for sensitive skin?" are
left to the LLM (catalog/reply.py's ``_ADVICE``), but never without products: :func:`advice` picks the candidates
(the catalog's search with the constraints parsed from the message: the top ``ADVICE_K``), the chain shows their cards
first and gives the LLM their records (:meth:`Advice.context`) instead of help-center text, and the answer check reads
what the model says about products through :attr:`Advice.claims` (catalog/claims.py): every product it names must be
a candidate, every price and attribute it states must be the record's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from catalog.claims import ProductClaims
from catalog.constraints import Filters
from catalog.reply import _ADVICE, _NOT_PRODUCT, AVAILABILITY, Reply, _card_list, money
from catalog.search import ProductSearch, base_title, card
from catalog.store import CatalogProduct

ADVICE_K = 4  # candidates: enough to choose from, few enough for a 2,048-token prompt with their records
_FOR_SOMEONE = re.compile(r"\b(?:for|to) my (?:\w+ )?(?:boyfriend|girlfriend|husband|wife|partner|mother|mum|mom|"
                          r"father|dad|parents|sister|brother|son|daughter|kids?|children|friends?|colleagues?|boss|"
                          r"grandma|grandpa|grandmother|grandfather|family|teacher)\b|给我的?(?:男朋友|女朋友|老公|老婆|"
                          r"妈妈|爸爸|父母|姐姐|妹妹|哥哥|弟弟|孩子|朋友|同事)", re.I)
_RECORD_FIELDS = ("brand", "color", "size", "material", "pattern")


@dataclass
class Advice:
    products: list[CatalogProduct]
    filters: Filters
    claims: ProductClaims
    cards: list[dict[str, Any]] = field(default_factory=list)   # ChatResponse.products, in order
    chips: list[dict[str, Any]] = field(default_factory=list)   # ChatResponse.filters
    note: str = ""                                              # a relaxed constraint, said to the customer

    @property
    def language(self) -> str:
        return self.filters.language

    def context(self) -> str:
        """The candidates' records as the LLM reads them: one line each, every value as the record states it."""
        return "\n".join(record_line(p) for p in self.products)

    def card_list(self) -> str:
        """The cards as the customer reads them first: the filter chips line, the note, and a numbered list."""
        zh = self.language == "zh"
        lines = [self.note] if self.note else []
        if self.filters.label:
            lines.append(("**筛选：** " if zh else "**Filters:** ") + self.filters.label)
        lines.append(_card_list([card(p, self.language) for p in self.products], zh))
        return "\n\n".join(lines)

    def honest_line(self) -> str:
        """What stands in for advice that failed its checks: the cards stay, and this says why there is no advice."""
        if self.language == "zh":
            return ("以上是我们目录中符合您问题的商品。我没能写出可以与商品资料逐一核对的建议，"
                    "请直接比较这些商品，或就其中任一款继续问我。")
        return ("These are the products in our catalog that fit your question. I could not write advice on them that "
                "I could check against their records, so please compare them above, or ask me about any of them.")

    def reply(self) -> Reply:
        """The catalog's own answer where no LLM can advise: the cards, and a line that says what they are."""
        line = ("以上是我们目录中符合您问题的商品，请比较它们，或就其中任一款继续问我。" if self.language == "zh" else
                "These are the products in our catalog that fit your question: compare them, or ask me about any "
                "of them.")
        return Reply("advice", f"{self.card_list()}\n\n{line}", self.cards, self.chips,
                     detail={"products": [p.id for p in self.products], "filters": self.filters.label})


def advice(search: ProductSearch, message: str) -> Advice | None:
    """The candidates for an advice message about products the catalog has (a category, a named product, or a
    budget), or None: not advice, about an order or the customer's own item, or nothing in the catalog fits."""
    text = " ".join(message.split())
    # "for my boyfriend", "给我男朋友": whom it is for, not the customer's own item or order
    if not text or not _ADVICE.search(text) or _NOT_PRODUCT.search(_FOR_SOMEONE.sub(" ", text)):
        return None
    filters = search.parse(text)
    named = search.named(text)
    budget = filters.price_min is not None or filters.price_max is not None
    if not filters.categories and not named and not budget:
        return None
    note = ""
    if filters.categories or named:
        answer = search.search(text, k=ADVICE_K)
        ids = [c.id for c in answer.products]
        if named and not filters.categories:  # "is the merino throw good for...": the named one first
            ids = list(dict.fromkeys([p.id for p in named] + ids))[:ADVICE_K]
        products = [p for p in (search.catalog.get(i) for i in ids) if p is not None]
        note, chips = answer.note, answer.filters.chips(answer.relaxed_fields)
    else:  # "a gift under $50": every kind, by the budget
        everything = list(search.catalog.products.values())
        ranked = search._rank(text, search._matches(filters, everything), filters)
        products, chips = [p for p, _ in ranked[:ADVICE_K]], filters.chips()
    if not products:
        return None
    return Advice(products, filters, ProductClaims(search, products, text),
                  [card(p, filters.language).model_dump() for p in products], chips, note)


def record_line(product: CatalogProduct) -> str:
    """"Family Electric Kettle 2.2 L: price $59.90; in stock; brand Northwind; material Stainless steel; capacity
    2.2 L; ..." (the sale price, when there is one, before the list price)."""
    parts = [f"price {money(product.price, product.currency)}"]
    if product.sale_price is not None:
        parts = [f"sale price {money(product.sale_price, product.currency)} (list price "
                 f"{money(product.price, product.currency)})"]
    parts.append(AVAILABILITY.get(product.availability, (product.availability,))[0])
    parts += [f"{name} {getattr(product, name)}" for name in _RECORD_FIELDS if getattr(product, name)]
    parts += [f"{name} {value}" for name, value in product.attributes.items()]
    title = base_title(product) if not product.color and not product.size else product.title
    return f"- {title}: " + "; ".join(parts) + (f". {product.description}" if product.description else "")
