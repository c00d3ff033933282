"""Answers from the catalog, with no LLM: search with filters, product facts, and comparisons.

* **Search** filters first (category, colour, size, material, price, stock: only values the catalog has, see
  :mod:`catalog.constraints`) and ranks what is left by a hybrid score, ``(1 - w) * cosine + w * BM25`` in the
  message's language's space (``w`` 0.3 for English, 0.9 for Chinese, where MiniLM is nearly blind: the same
  split as the knowledge base; the Chinese space's cosine is against the product's English vector, see
  :mod:`catalog.store`). Variants collapse to the best one per item group. When nothing passes the
  filters, one constraint at a time is relaxed (stock, size, colour, material, then price), the first that finds
  products is named in the answer, and those products are shown; when none alone helps, all but the category
  are dropped. "We don't carry that" is said only when no category matched and none of the message's own words
  appears anywhere in the catalog's text.
* **A fact** is read from the product's record: the field the question names when it names one (absent: "not
  stated"), else the field :mod:`catalog.field_ranking` picks among the fields of the product's kind (absent from
  this record: "not stated"; below its floor: "not stated" with no field). Every fact names the product id and the
  field.
* **A comparison** takes 2-4 products, named in the message or picked by the filters ("your two cheapest desk
  lamps"); every cell is a record's value or "not stated".
"""

from __future__ import annotations

import re

import numpy as np

from catalog.answers import Card, Cell, Comparison, Fact, FactAnswer, Row, SearchAnswer, VariantAnswer
from catalog.attributes import content_words
from catalog.constraints import COMPARISON, MATERIAL_ZH, Facets, Filters, parse
from catalog.field_ranking import EmbedCache, RankedField, kind_fields, rank_field, without_name
from catalog.field_words import FIELD_WORDS, FIELD_ZH, asked_field, fits_units, unit_field, zh_field_words
from catalog.naming import TitleIndex, base_title, named_products
from catalog.store import Catalog, CatalogProduct
from core.text import language_of

LEXICAL_WEIGHT = {"en": 0.3, "zh": 0.9}
RELAX_ORDER = ("in_stock", "size", "color", "material", "price")
_SHOP_WORDS = frozenset(["find", "show", "looking", "look", "want", "need", "buy", "sell", "sells", "selling", "carry", "stock",
                         "have", "got", "any", "some", "something", "recommend", "recommendation", "please", "hi", "hello",
                         "thanks", "thank", "search", "get", "shop", "store", "item", "items", "product", "products", "cheap",
                         "cheaper", "cheapest", "expensive", "price", "priced", "under", "below", "between", "over", "above",
                         "less", "more", "than", "dollars", "usd", "bucks", "size", "colour", "color", "material", "available",
                         "new", "good", "best", "nice"])
_ZH_SHOP = re.compile(r"你们|有没有|有吗|卖不卖|卖|吗|我想要|我要|想买|买|找|推荐|一下|请问|的|个|款|件|吧|呢|可以|给我|看看|有|"
                      r"元|块|以内|以下|以上|之内")


def card(product: CatalogProduct, language: str = "en", score: float = 0.0) -> Card:
    title = product.title_zh if language == "zh" and product.title_zh else product.title
    return Card(id=product.id, title=title, price=product.price, sale_price=product.sale_price,
                currency=product.currency, availability=product.availability, link=product.link,
                image_link=product.image_link, color=product.color, size=product.size,
                category=product.category, score=round(score, 4))


class ProductSearch:
    """Search, facts and comparisons over one :class:`~catalog.store.Catalog`."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._facets_version = -1
        self._facets = Facets()
        self._titles = TitleIndex([], self._facets)
        self._vocab: set[str] = set()
        self._vocab_zh: set[str] = set()
        self._embed = EmbedCache(catalog.encoder)

    @property
    def facets(self) -> Facets:
        version = self.catalog.loaded_version  # refreshed once per message (catalog.live)
        if version != self._facets_version:
            products = list(self.catalog.products.values())
            self._facets = Facets.from_products(products)
            self._titles = TitleIndex(products, self._facets)
            self._vocab = set()
            self._vocab_zh = set()
            for p in products:
                self._vocab |= content_words(" ".join([p.title, p.description, p.product_type, p.material,
                                                       " ".join(f"{k} {v}" for k, v in p.attributes.items())]))
                zh = p.title_zh + p.description_zh + p.product_type_zh
                self._vocab_zh |= {zh[i:i + 2] for i in range(len(zh) - 1)}
            self._facets_version = version
        return self._facets

    @property
    def titles(self) -> TitleIndex:
        """Which products each title word names, for the catalog version loaded for this message."""
        _ = self.facets  # rebuilt with the facets when the version changed
        return self._titles

    # ---- search -------------------------------------------------------------------------
    def parse(self, message: str) -> Filters:
        """The message's constraints (:func:`catalog.constraints.parse`). In a comparison of products it names ("the
        glass kettle and the gooseneck kettle"), a material word of their titles names them rather than filters."""
        filters = parse(message, self.facets)
        if not filters.material or not COMPARISON.search(message):
            return filters
        named = self.named(message, by_material=True)
        titles = " ".join(f"{base_title(p)} {p.title_zh}".lower() for p in named)
        words = [filters.material, *(k for k, v in MATERIAL_ZH.items() if v == filters.material)]
        if len(named) < 2 or not any(word in titles for word in words):
            return filters
        changed = filters.model_copy(update={"material": ""})
        return changed.model_copy(update={"label": changed.describe()})

    def scores(self, message: str, ids: list[str]) -> np.ndarray:
        """Hybrid score of each product in ``ids`` for ``message`` in the message's language's space."""
        language = language_of(message)
        space = self.catalog.spaces.get(language) or self.catalog.spaces["en"]
        if space.index is None or not ids:
            return np.zeros(len(ids), dtype=np.float32)
        rows = np.asarray([space.position.get(i, -1) for i in ids])
        vector = self.catalog.encoder.encode_query(message)
        dense = np.clip(np.einsum("ij,j->i", space.vectors, vector), 0.0, 1.0)
        lexical = space.index.lexical_scores(message)
        w = LEXICAL_WEIGHT.get(language, 0.3)
        fused = (1.0 - w) * dense + w * lexical
        return np.where(rows >= 0, fused[np.maximum(rows, 0)], 0.0).astype(np.float32)

    def _matches(self, filters: Filters, products: list[CatalogProduct]) -> list[CatalogProduct]:
        out = []
        for p in products:
            price = p.effective_price
            if filters.color and p.color.lower() != filters.color.lower():
                continue
            if filters.size and p.size.lower() != filters.size.lower():
                continue
            if filters.material and not _has_words(p.material + " " + p.attributes.get("material", ""), filters.material):
                continue
            if filters.price_max is not None and price > filters.price_max:
                continue
            if filters.price_min is not None and price < filters.price_min:
                continue
            if filters.in_stock and p.availability != "in_stock":
                continue
            out.append(p)
        return out

    def not_carried(self, message: str, filters: Filters) -> bool:
        """True when the message asks for something none of the catalog's text mentions (and no category matched)."""
        if filters.categories:
            return False
        if filters.language == "zh":
            rest = _ZH_SHOP.sub(" ", message)
            for term in filter(None, filters.label.split(" · ")):
                rest = rest.replace(term.replace("色", ""), " ")
            runs = re.findall(r"[\u4e00-\u9fff]{2,}", rest)
            if not runs:
                return False
            return not any(run[i:i + 2] in self._vocab_zh for run in runs for i in range(len(run) - 1))
        words = {w for w in content_words(message) if w not in _SHOP_WORDS and not w.isdigit()}
        words -= {filters.color.lower(), filters.material, filters.size.lower()}
        words -= {m.split(" ", 1)[1] for m in filters.missing}
        return bool(words) and not (words & self._vocab)

    def search(self, message: str, k: int = 6) -> SearchAnswer:
        filters = self.parse(message)
        products = list(self.catalog.products.values())
        if self.not_carried(message, filters):
            zh = filters.language == "zh"
            return SearchAnswer(filters=filters, carried=False,
                                note="抱歉，我们没有这类商品。" if zh else "Sorry, we don't carry that.")
        base = [p for p in products if not filters.categories or p.category in filters.categories]
        found = self._matches(filters, base)
        relaxed: list[str] = []
        if not found and base:
            for name in (n for n in RELAX_ORDER if n in filters.active()):
                trial = self._matches(filters.without(name), base)
                if trial:
                    found, relaxed = trial, [name]
                    break
            else:
                found, relaxed = base, filters.active()
        ranked = self._rank(message, found, filters)
        count = filters.count or k
        note = self._relax_note(filters, relaxed)
        if filters.missing and not relaxed:
            note = _missing_note(filters)
        return SearchAnswer(filters=filters, products=[card(p, filters.language, s) for p, s in ranked[:count]],
                            relaxed=[_constraint_text(filters, n) for n in relaxed], relaxed_fields=list(relaxed),
                            note=note)

    def _rank(self, message: str, products: list[CatalogProduct], filters: Filters) -> list[tuple[CatalogProduct, float]]:
        scores = self.scores(message, [p.id for p in products])
        order = sorted(range(len(products)), key=lambda i: -scores[i])
        if filters.order:
            sign = 1.0 if filters.order == "price_asc" else -1.0
            order = sorted(order, key=lambda i: sign * products[i].effective_price)
        seen: set[str] = set()
        out = []
        for i in order:
            group = products[i].group
            if group in seen:
                continue
            seen.add(group)
            out.append((products[i], float(scores[i])))
        return out

    @staticmethod
    def _relax_note(filters: Filters, relaxed: list[str]) -> str:
        if not relaxed:
            return ""
        what = ", ".join(_constraint_text(filters, n) for n in relaxed)
        if filters.language == "zh":
            return f"没有完全符合“{filters.label}”的商品；以下是放宽“{what}”后最接近的商品。"
        return f"Nothing matches {filters.label} exactly; these are the closest without {what}."

    # ---- facts --------------------------------------------------------------------------
    def targets(self, message: str, filters: Filters, limit: int = 4, best_only: bool = True,
                by_material: bool = False) -> list[CatalogProduct]:
        """The products a message is about: those it names by title (the best named only, unless ``best_only`` is
        False), else its category's (one per group, matching its colour/size when given), else the best search hit."""
        products = list(self.catalog.products.values())
        named = self._named(message, by_material)
        if named and filters.categories:
            # "the Merino Wool Throw" also names its kind: keep the named ones of that kind ("your towels" with
            # "cotton" names a material, not the Cotton Throw Blanket)
            named = {g: v for g, v in named.items() if v[1].category in filters.categories}
        if named:
            ranked = sorted(named.values(), key=lambda v: v[0], reverse=True)
            picked = [p for rank, p in ranked if rank == ranked[0][0] or not best_only]
            return [self._variant(p.group, filters) for p in picked[:limit]]
        if filters.categories:
            kind = [p for p in products if p.category in filters.categories]
            # "is the wool blanket ...": the blankets that are wool, when there are any
            groups = dict.fromkeys(p.group for p in (self._matches(filters, kind) or kind))
            return [self._variant(g, filters) for g in list(groups)[:limit]]
        best = self._rank(message, products, filters)
        return [best[0][0]] if best else []

    def named(self, message: str, by_material: bool = False, by_measure: bool = True) -> list[CatalogProduct]:
        """The products ``message`` names by title, one per item group, best named first ([] when it names none).
        ``by_material``: a material word alone names a product of the kind the message names ("the glass kettle",
        "is the merino throw available in navy?"); otherwise it is taken as a question about the material ("are your
        towels pure cotton?")."""
        ranked = sorted(self._named(message, by_material, by_measure).values(), key=lambda v: v[0], reverse=True)
        return [p for _, p in ranked]

    def _named(self, message: str, by_material: bool = False,
               by_measure: bool = True) -> dict[str, tuple[tuple[int, float], CatalogProduct]]:
        return named_products(message, self.titles, by_material, by_measure)

    def _variant(self, group: str, filters: Filters) -> CatalogProduct:
        variants = self.titles.groups[group]
        exact = [p for p in variants if (not filters.color or p.color.lower() == filters.color.lower())
                 and (not filters.size or p.size.lower() == filters.size.lower())]
        return (exact or variants)[0]

    def fact(self, message: str, product_id: str | None = None) -> FactAnswer:
        filters = self.parse(message)
        product = self.catalog.get(product_id) if product_id else None
        asked = self.asked_field(message)
        # "are your towels pure cotton?" asks about the material: every towel answers, not only the cotton ones
        about = filters.without("material") if asked == "material" and filters.material else filters
        if asked and filters.category_term in (asked, *FIELD_WORDS.get(asked, ())):
            # "how long is the cable on the studio headphones?": "cable" names the field, not the Cables
            about = about.model_copy(update={"categories": [], "category_term": ""})
        targets = [product] if product else self.targets(message, about)
        if not targets:
            return FactAnswer(filters=filters, note="No product matches the question.")
        return FactAnswer(filters=filters, facts=[self._fact(message, p, asked, filters.language) for p in targets])

    def asked_field(self, message: str) -> str:
        """The field the question names (:func:`catalog.field_words.asked_field`), "" when it names none: for the
        product it names best (of the kind it names, when it names one: "the travel mug", not the travel kettle),
        else for the kind it names."""
        kinds = parse(message, self.facets).categories
        named = self.named(message)
        product = next((p for p in named if p.category in kinds), named[0] if named else None)
        name = f"{base_title(product)} {product.title_zh}" if product else ""
        titles = self.titles
        kind = [v for k in kinds for g in sorted(titles.kind_groups.get(k, ())) for v in titles.groups[g]] \
            if product is None else []
        return asked_field(message, self.facets_attribute_names(), product, name, kind)

    def facets_attribute_names(self) -> list[str]:
        return self.titles.attribute_names

    def _fact(self, message: str, product: CatalogProduct, asked: str, language: str) -> Fact:
        title = product.title_zh if language == "zh" and product.title_zh else product.title
        if asked:
            name, value, score = asked, product.field_value(asked), 1.0
        else:
            ranked = self.ranked_field(message, product)
            if ranked is None or not ranked.confident:
                return _fact(product, title, "", "", ranked.score if ranked else 0.0, language)
            name, value, score = ranked.name, ranked.value, ranked.score
        if value and not fits_units(message, value):  # "how many mAh" is not answered by "20 hours": not stated
            name, value = unit_field(message) or name, ""
        return _fact(product, title, name, value, score, language)

    def ranked_field(self, message: str, product: CatalogProduct) -> RankedField | None:
        """The field of ``product``'s kind the attribute ranking picks for ``message`` (:mod:`catalog.field_ranking`),
        the words naming the product left out; check ``confident`` before taking it."""
        facets = self.facets
        # the kind's products from the index, in catalog order (a scan of every product cost 10,000 per question)
        kind = self.titles.kind_products.get(product.category, []) if product.category else []
        name_words = content_words(base_title(product)) | {
            w for alias, leaves in facets.category_aliases.items() if product.category in leaves for w in content_words(alias)}
        name_zh = [product.title_zh, *(a for a, leaves in facets.category_aliases_zh.items() if product.category in leaves)]
        question = without_name(" ".join(message.split()), name_words, name_zh)
        return rank_field(question, kind_fields(product, kind), self.catalog.encoder, zh_names=zh_field_words,
                          embed=self._embed.embed(self.catalog.loaded_version))

    # ---- stock and variants -------------------------------------------------------------
    def variant(self, message: str, product_id: str | None = None) -> VariantAnswer | None:
        """"Is it in blue in size M?": the product (``product_id``'s, else the one the message is about), whether it
        comes in that colour and size, and whether that variant is in stock. None when no product is found."""
        filters = self.parse(message)
        asked = {m.split(" ", 1)[0]: m.split(" ", 1)[1] for m in filters.missing}  # asked, but in no product at all
        color, size = filters.color or asked.get("color", ""), filters.size or asked.get("size", "")
        product = self.catalog.get(product_id) if product_id else None
        if product is None:
            found = self.targets(message, filters.without("color").without("size"), by_material=True)
            product = found[0] if found else None
        if product is None:
            return None
        variants = self.titles.groups.get(product.group, [])  # its item group's variants, in catalog order
        colors, sizes = list(dict.fromkeys(p.color for p in variants if p.color)), \
            list(dict.fromkeys(p.size for p in variants if p.size))
        matching = [p for p in variants if (not color or p.color.lower() == color.lower())
                    and (not size or p.size.lower() == size.lower())]
        zh = filters.language == "zh"
        name = base_title(product) if not zh or not product.title_zh else product.title_zh
        wanted = " ".join(x for x in (color, f"size {size}" if size and not zh else (f"{size}码" if size else "")) if x)
        in_stock = [p for p in matching if p.availability == "in_stock"]
        if not matching:
            size_list = (("尺码 " if zh else "sizes ") + ", ".join(sizes)) if sizes else ""
            comes = "; ".join(x for x in (", ".join(colors), size_list) if x)
            text = f"{name}没有{wanted}；可选：{comes}。" if zh else f"{name} does not come in {wanted}; it comes in {comes}."
        elif in_stock:
            text = f"{name}有{wanted}，有货。" if zh else f"{name} comes in {wanted or 'these variants'}, and it is in stock."
        else:
            state = matching[0].availability.replace("_", " ")
            text = f"{name}有{wanted}，但目前缺货。" if zh else f"{name} comes in {wanted}, but it is {state}."
        return VariantAnswer(group=product.group, title=name, color=color, size=size, offered=bool(matching),
                             variants=[card(p, filters.language) for p in matching], colors=colors, sizes=sizes,
                             text=text)

    # ---- comparison ---------------------------------------------------------------------
    def named_order(self, message: str, products: list[CatalogProduct]) -> list[CatalogProduct]:
        """``products`` in the order ``message`` names them (where the first word of its title that none of the others
        has stands; Chinese: a character pair), the rest after them in their given order: a comparison's columns
        follow the customer's wording, the same in every process."""
        zh = bool(re.search(r"[\u4e00-\u9fff]", message))
        language = "zh" if zh else "en"
        text = " ".join(message.lower().split())
        own = {p.id: self.titles.own[language].get(p.id, frozenset()) for p in products}

        def first(p: CatalogProduct) -> int:
            others = set().union(*(own[q.id] for q in products if q.group != p.group))
            words = sorted(own[p.id] - others) or sorted(own[p.id])
            found = [m.start() for w in words for m in re.finditer(
                re.escape(w) if zh else r"(?<![a-z0-9])" + re.escape(w), text)]
            return min(found, default=len(text) + 1)

        at = {p.id: first(p) for p in products}
        return [p for _, p in sorted(enumerate(products), key=lambda item: (at[item[1].id], item[0]))]

    def compare(self, message: str = "", product_ids: list[str] | None = None) -> Comparison:
        filters = self.parse(message) if message else None
        if product_ids:
            products = [p for p in (self.catalog.get(i) for i in product_ids) if p is not None]
        elif filters is not None and (filters.order or filters.count):
            products = [self.catalog.products[c.id] for c in self.search(message, k=filters.count or 2).products]
        else:
            assert filters is not None
            products = self.named_order(message, self.targets(message, filters, best_only=False, by_material=True))
            if len(products) < 2:
                products = [self.catalog.products[c.id] for c in self.search(message, k=2).products]
        products = products[:4]
        language = filters.language if filters else "en"
        fields = ["price", "sale_price", "availability", "brand", "color", "size", "material"]
        for p in products:
            fields += [name for name in p.attributes if name not in fields]
        rows = []
        for name in fields:
            cells = [Cell(value=p.field_value(name), product_id=p.id, field=name, stated=bool(p.field_value(name)))
                     for p in products]
            if any(c.stated for c in cells):
                rows.append(Row(field=name, cells=cells))
        note = "" if len(products) >= 2 else "Fewer than two products match; nothing to compare."
        return Comparison(products=[card(p, language) for p in products], rows=rows, filters=filters, note=note)


def _has_words(text: str, term: str) -> bool:
    return all(re.search(r"(?<![a-z])" + re.escape(w) + r"(?![a-z])", text.lower()) for w in term.split())


def _constraint_text(filters: Filters, name: str) -> str:
    if name == "price":
        return "price " + (filters.model_copy(update={"color": "", "size": "", "material": "", "category_term": "",
                                                      "in_stock": False}).describe())
    if name == "in_stock":
        return "in stock"
    return f"{name} {getattr(filters, name)}"


def _missing_note(filters: Filters) -> str:
    what = ", ".join(filters.missing)
    if filters.language == "zh":
        return f"我们的商品中没有：{what}；以下是其他选择。"
    return f"We have no {what} in the catalog; here are the other options."


def _fact(product: CatalogProduct, title: str, name: str, value: str, score: float, language: str) -> Fact:
    zh = language == "zh"
    label = FIELD_ZH.get(name, name) if zh else name
    if value:
        text = f"{title}的{label}：{value}" if zh else f"{title}: {name} is {value}."
    elif name:
        text = f"商品资料未注明{title}的{label}。" if zh else f"{title}: the product record does not state its {name}."
    else:
        text = f"商品资料中没有回答这个问题的信息（{title}）。" if zh else \
            f"{title}: the product record does not state this."
    return Fact(product_id=product.id, title=title, field=name, value=value, stated=bool(value), score=round(score, 4),
                text=text)
