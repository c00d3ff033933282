"""Constraints parsed from a shopper's message, each checked against the catalog's own facet values.

A constraint is kept only when the catalog has that value: "blue" filters only if some product's color is blue,
"wool" only if some material says wool, "throw blanket" only if a product_type path names it. A value the message
names that the catalog lacks ("purple", when nothing is purple) is not used as a filter; it is listed in
``missing`` so the answer can say so. Price bounds ("under $50", "between 20 and 40", "50元以内", "两百元以内") need no
catalog value; they are read in :mod:`catalog.prices`.

Price bounds are compared with the catalog's prices as numbers: a bound in yuan on a catalog priced in dollars is
not converted (the demo's prices are in USD; a shop selling in CNY gets what its customers mean).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from catalog.prices import chinese_number, parse_price
from core.text import compiled, language_of

# Colour words a shopper may use, English and Chinese; only those the catalog has become filters.
COLOURS = ("black", "white", "grey", "gray", "silver", "blue", "navy", "red", "green", "olive", "yellow", "orange",
           "pink", "purple", "brown", "beige", "cream", "natural", "gold", "brass", "charcoal", "teal", "burgundy", "clear")
COLOUR_ZH = {"黑": "black", "白": "white", "灰": "grey", "银": "silver", "蓝": "blue", "藏青": "navy", "海军蓝": "navy",
             "红": "red", "绿": "green", "橄榄绿": "olive", "黄": "yellow", "橙": "orange", "粉": "pink", "紫": "purple",
             "棕": "brown", "米": "beige", "奶油": "cream", "原木": "natural", "金": "gold", "黄铜": "brass",
             "炭灰": "charcoal", "藏蓝": "navy", "透明": "clear"}
COLOUR_SYNONYMS = {"gray": "grey", "navy blue": "navy", "off-white": "cream", "off white": "cream"}
MATERIALS = ("wool", "merino", "cashmere", "cotton", "linen", "silk", "polyester", "fleece", "microfibre", "microfiber",
             "bamboo", "leather", "denim", "canvas", "stainless steel", "steel", "glass", "ceramic", "stoneware",
             "porcelain", "cast iron", "aluminium", "aluminum", "plastic", "silicone", "wood", "oak", "down", "velvet",
             "acrylic", "nylon")
MATERIAL_ZH = {"羊毛": "wool", "美利奴": "merino", "羊绒": "cashmere", "纯棉": "cotton", "棉": "cotton", "亚麻": "linen",
               "真丝": "silk", "丝绸": "silk", "涤纶": "polyester", "抓绒": "fleece", "超细纤维": "microfibre", "竹": "bamboo",
               "皮革": "leather", "真皮": "leather", "牛仔": "denim", "帆布": "canvas", "不锈钢": "stainless steel",
               "玻璃": "glass", "陶瓷": "ceramic", "粗陶": "stoneware", "瓷": "porcelain", "铸铁": "cast iron",
               "铝": "aluminium", "塑料": "plastic", "硅胶": "silicone", "木": "wood", "橡木": "oak"}
MATERIAL_SYNONYMS = {"microfiber": "microfibre", "aluminum": "aluminium", "woollen": "wool", "woolen": "wool"}
# English names shoppers use for a kind of product, mapped to the word a catalog's product_type would use
CATEGORY_SYNONYMS = {"throw": "blanket", "throws": "blanket", "jumper": "sweater", "jumpers": "sweater",
                     "pullover": "sweater", "earphones": "headphones", "headset": "headphones", "cup": "mug",
                     "cups": "mug", "comforter cover": "duvet cover", "quilt cover": "duvet cover", "lamp": "lamp",
                     "tee": "t-shirt", "tees": "t-shirt", "tshirt": "t-shirt", "light": "lamp", "pot": "cookware",
                     "pots": "cookware", "pan": "cookware", "pans": "cookware", "casserole": "cookware",
                     "oven glove": "oven mitt", "oven gloves": "oven mitt", "earbuds": "headphones",
                     "earbud": "headphones", "portable charger": "power bank", "portable chargers": "power bank",
                     "battery pack": "power bank", "adaptor": "adapter", "adaptors": "adapter"}
CATEGORY_SYNONYMS_ZH = {"毛毯": "毯子", "盖毯": "毯子", "披毯": "毯子", "桌灯": "台灯", "耳麦": "耳机", "针织衫": "毛衣",
                        "杯子": "马克杯", "杯": "马克杯", "水壶": "电水壶", "热水壶": "电水壶", "烧水壶": "电水壶",
                        "壶": "电水壶", "锅": "锅具", "移动电源": "充电宝", "毛衫": "毛衣", "羊绒衫": "毛衣"}
# Comparison wording: a comparison may name two kinds ("the power bank and the travel adapter"); "what's the
# difference", "compared with", "side by side", "有啥不同", "差别在哪", "比一比"
COMPARISON = re.compile(r"\b(?:compar(?:e|es|ed|ing|ison)|versus|vs\.?|differences?|differ|side by side)(?!\w)|"
                        r"比较|对比|区别|(?:有|没有)(?:什么|啥)?不同(?!的?(?:颜色|色|尺码|尺寸|款|型号|规格|大小))|不一样|差别|差异|"
                        r"比一比|相比", re.I)
SIZE_WORDS = {"extra small": "XS", "small": "S", "medium": "M", "large": "L", "extra large": "XL"}
SIZE_LETTERS = {letter.lower(): word for word, letter in SIZE_WORDS.items()}  # "l" -> "large": a basket's Large
SIZE_ZH = {"小号": "S", "中号": "M", "大号": "L", "加大号": "XL", "小码": "S", "中码": "M", "大码": "L", "加大码": "XL"}

_WORDS_NUM = {"one": 1, "two": 2, "three": 3, "four": 4, "a couple of": 2, "a pair of": 2}


class Filters(BaseModel):
    """The constraints a message put on the products, every value one the catalog has."""

    categories: list[str] = []  # product_type leaves the category words matched
    category_term: str = ""  # the words the shopper used for it
    price_min: float | None = None
    price_max: float | None = None
    currency: str = ""  # "USD", "CNY" or "" when the message named none
    color: str = ""
    size: str = ""
    material: str = ""
    in_stock: bool = False
    order: str = ""  # "price_asc" / "price_desc": cheapest or most expensive first
    count: int | None = None  # "two cheapest": how many products were asked for
    missing: list[str] = []  # values the message named that the catalog does not have ("color purple")
    language: str = "en"
    label: str = ""

    def active(self) -> list[str]:
        """Names of the constraints that filter (the ones search may relax)."""
        names = [name for name in ("color", "size", "material") if getattr(self, name)]
        if self.price_min is not None or self.price_max is not None:
            names.append("price")
        if self.in_stock:
            names.append("in_stock")
        return names

    def without(self, name: str) -> Filters:
        changes: dict = {"in_stock": False} if name == "in_stock" else (
            {"price_min": None, "price_max": None} if name == "price" else {name: ""})
        relaxed = self.model_copy(update=changes)
        return relaxed.model_copy(update={"label": relaxed.describe()})

    def chips(self, relaxed: Iterable[str] = ()) -> list[dict]:
        """The constraints as the customer's filter chips, each with its label ("blue", "throw blanket", "under
        $50"): ``field``, ``value``, ``label`` and ``relaxed`` (dropped to find anything; see search)."""
        dropped = set(relaxed)
        bare = Filters(language=self.language, currency=self.currency)
        out: list[dict] = []
        if self.category_term:
            out.append({"field": "category", "value": ", ".join(self.categories), "label": self.category_term})
        for name in ("color", "material", "size"):
            value = getattr(self, name)
            if value:
                out.append({"field": name, "value": value,
                            "label": bare.model_copy(update={name: value}).describe()})
        if self.price_min is not None or self.price_max is not None:
            out.append({"field": "price", "value": {"min": self.price_min, "max": self.price_max,
                                                     "currency": self.currency or "USD"},
                        "label": bare.model_copy(update={"price_min": self.price_min,
                                                         "price_max": self.price_max}).describe()})
        if self.in_stock:
            out.append({"field": "in_stock", "value": True, "label": bare.model_copy(update={"in_stock": True}).describe()})
        for chip in out:
            chip["relaxed"] = chip["field"] in dropped
        return out

    def describe(self) -> str:
        zh = self.language == "zh"
        parts = []
        if self.color:
            parts.append(next((k + "色" for k, v in COLOUR_ZH.items() if v == self.color.lower()), self.color) if zh
                         else self.color.lower())
        if self.material:
            parts.append(next((k for k, v in MATERIAL_ZH.items() if v == self.material), self.material) if zh
                         else self.material)
        if self.size:
            parts.append(f"{self.size}码" if zh else f"size {self.size}")
        if self.category_term:
            parts.append(self.category_term)
        parts.extend(_price_label(self.price_min, self.price_max, self.currency, zh))
        if self.in_stock:
            parts.append("有货" if zh else "in stock")
        return " · ".join(parts)


def _money(value: float, currency: str, zh: bool) -> str:
    number = f"{value:g}"
    if zh or currency == "CNY":
        return f"{number}元"
    return f"${number}" if currency in ("USD", "") else f"{number} {currency}"


def _price_label(low: float | None, high: float | None, currency: str, zh: bool) -> list[str]:
    if low is not None and high is not None:
        return [f"{low:g}–{_money(high, currency, zh)}" if zh else f"{_money(low, currency, zh)}–{_money(high, currency, zh)}"]
    if high is not None:
        return [f"{_money(high, currency, zh)}以内" if zh else f"under {_money(high, currency, zh)}"]
    if low is not None:
        return [f"{_money(low, currency, zh)}以上" if zh else f"over {_money(low, currency, zh)}"]
    return []


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _plural(word: str) -> str:
    if word.endswith("y") and len(word) > 2 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("ch", "sh", "ss", "x")):
        return word + "es"
    return word if word.endswith("s") else word + "s"


@dataclass
class Facets:
    """The catalog's facet values as the parser matches them."""

    category_aliases: dict[str, set[str]] = field(default_factory=dict)  # lower-case phrase -> leaves
    category_aliases_zh: dict[str, set[str]] = field(default_factory=dict)
    colors: dict[str, str] = field(default_factory=dict)  # lower-case -> the catalog's spelling
    sizes: dict[str, str] = field(default_factory=dict)
    material_words: set[str] = field(default_factory=set)  # words found in the catalog's material values
    leaf_zh: dict[str, str] = field(default_factory=dict)  # leaf -> its Chinese name
    size_leaves: dict[str, set[str]] = field(default_factory=dict)  # lower-case size -> the leaves that have it
    # a colour word with its neighbour in a product's title or a category's name ("green tea", "red rooibos", "earl
    # grey"): in a message, that phrase names the product or kind, not a colour
    colour_phrases: set[str] = field(default_factory=set)
    # words of the shopper's names for kinds (CATEGORY_SYNONYMS) that no product_type uses ("earbuds", "jumper"): a
    # product whose title has one is still named by it (catalog/naming.py)
    synonym_words: set[str] = field(default_factory=set)
    # Words each product's title names it by (catalog/naming.py), worked out once per catalog version: computed
    # per message they cost seconds at 10,000 products (every product's kind aliases, for every product).
    title_words: dict[tuple[str, str, str], frozenset[str]] = field(default_factory=dict, repr=False, compare=False)
    # The last messages' parses: naming, the field asked and the answer each parse the same message
    parsed: dict[str, Filters] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_products(cls, products: Iterable) -> Facets:
        facets = cls()
        for p in products:
            nodes = [n.strip() for n in p.product_type.split(">") if n.strip()]
            leaf = nodes[-1] if nodes else ""
            if leaf:
                # every node but the root ("Home") names the leaves under it: "bedding" covers duvet covers and sheets
                for node in nodes[1:] if len(nodes) > 1 else nodes:
                    for alias in _aliases(node.lower()):
                        facets.category_aliases.setdefault(alias, set()).add(leaf)
                zh_nodes = [n.strip() for n in p.product_type_zh.split(">") if n.strip()]
                for node in zh_nodes[1:] if len(zh_nodes) > 1 else zh_nodes:
                    # messages are matched lower-case: "t恤" for "T恤" too
                    for alias in {node, node.lower()}:
                        facets.category_aliases_zh.setdefault(alias, set()).add(leaf)
                if zh_nodes:
                    facets.leaf_zh[leaf] = zh_nodes[-1]
            if p.color:
                facets.colors[p.color.lower()] = p.color
            if p.size:
                facets.sizes[p.size.lower()] = p.size
                if leaf:
                    facets.size_leaves.setdefault(p.size.lower(), set()).add(leaf)
            for name in (p.title.split(" - ")[0], *nodes):
                facets.colour_phrases |= _colour_phrases(name)
            material = " ".join(v for k, v in p.attributes.items() if k.lower() == "material") + " " + p.material
            facets.material_words.update(re.findall(r"[a-z]+", material.lower()))
        typed_words = {_singular(w) for alias in facets.category_aliases for w in re.findall(r"[a-z0-9]+", alias)}
        for synonym, target in CATEGORY_SYNONYMS.items():
            leaves = facets.category_aliases.get(target)
            if leaves and synonym not in facets.category_aliases:
                facets.category_aliases[synonym] = set(leaves)
            if leaves and " " not in synonym and " " not in target:
                # the synonym in the kind's longer names too: "desk light" is a desk lamp, "travel adaptor" an adapter
                for alias, kinds in list(facets.category_aliases.items()):
                    words = alias.split()
                    if len(words) > 1 and _singular(words[-1]) == _singular(target) and \
                            _singular(synonym) not in map(_singular, words):
                        for variant in (_singular(synonym), _plural(_singular(synonym))):
                            facets.category_aliases.setdefault(" ".join(words[:-1] + [variant]), set(kinds))
        facets.synonym_words = {w for alias in facets.category_aliases for w in re.findall(r"[a-z0-9]+", alias)
                                if _singular(w) not in typed_words}
        for synonym, target in CATEGORY_SYNONYMS_ZH.items():
            leaves = facets.category_aliases_zh.get(target)
            if leaves and synonym not in facets.category_aliases_zh:
                facets.category_aliases_zh[synonym] = set(leaves)
        return facets

    def has_material(self, term: str) -> bool:
        return all(word in self.material_words for word in term.split())


def _colour_phrases(name: str) -> set[str]:
    """"Green Tea" -> {"green tea", "green teas"}; "Earl Grey Bergamot" -> {"earl grey", "grey bergamot", ...}."""
    words = re.findall(r"[a-z]+(?:-[a-z]+)*", name.lower())
    colours = set(COLOURS) | set(COLOUR_SYNONYMS)
    out: set[str] = set()
    for i, word in enumerate(words):
        if word not in colours:
            continue
        for before, after in ((words[i - 1], word) if i else (None, None), (word, words[i + 1]) if i + 1 < len(words)
                              else (None, None)):
            if before and after:
                out |= {f"{before} {after}", f"{before} {_singular(after)}", f"{before} {_plural(_singular(after))}"}
    return out


def _aliases(node: str) -> set[str]:
    """"throw blankets" -> itself, its singular, and its head noun in both numbers ("blanket", "blankets")."""
    words = node.split()
    out = {node, " ".join(words[:-1] + [_singular(words[-1])])}
    head = _singular(words[-1])
    out.update({head, _plural(head)})
    if "-" in node:
        out.update({variant for a in list(out) for variant in (a.replace("-", ""), a.replace("-", " "))})
    return out


def _longest(text: str, phrases: Iterable[str], words: bool = True, bound: str = "a-z0-9",
             plural: bool = False) -> list[tuple[int, int, str]]:
    """Non-overlapping matches of ``phrases`` in ``text``, longest first (word-bounded unless ``words`` is False;
    ``bound``: the characters a word may not touch; ``plural``: a phrase also matches with "s"/"es" after it)."""
    taken: list[tuple[int, int, str]] = []
    for phrase in sorted(phrases, key=len, reverse=True):
        pattern = (rf"(?<![{bound}])" + re.escape(phrase) + ("(?:e?s)?" if plural else "") + rf"(?![{bound}])") \
            if words else re.escape(phrase)
        for match in compiled(pattern).finditer(text):
            if not any(s < match.end() and match.start() < e for s, e, _ in taken):
                taken.append((match.start(), match.end(), phrase))
    return sorted(taken)


def parse(message: str, facets: Facets) -> Filters:
    """The constraints ``message`` puts on products, checked against ``facets`` (a copy: callers may change it)."""
    found = facets.parsed.get(message)
    if found is None:
        found = _parse(message, facets)
        if len(facets.parsed) >= _PARSED_KEPT:
            facets.parsed.clear()
        facets.parsed[message] = found
    return found.model_copy(deep=True)


_PARSED_KEPT = 64


def _parse(message: str, facets: Facets) -> Filters:
    language = language_of(message)
    text = " ".join(message.lower().split())
    out = Filters(language=language)
    spans: list[tuple[int, int]] = []  # what the constraints used up, so "m" in "ml" is not read again

    # category: the longest names first ("desk lamps" before "lamps"), but not a word of a longer size name ("sheet" in
    # "bath sheet", a towel's size): that size names its categories
    found = _longest(text, facets.category_aliases, bound="a-z0-9-")  # not "cable" in "cable-knit"
    found += [(s, e, p) for s, e, p in _longest(text, facets.category_aliases_zh, words=False)]
    named_sizes = _longest(text, [z for z in facets.sizes if " " in z], plural=True)  # "bath sheets" too
    found = [m for m in found if not any(s <= m[0] and m[1] <= e and e - s > m[1] - m[0] for s, e, _ in named_sizes)]
    if not found and named_sizes:
        out.categories = sorted(set().union(*(facets.size_leaves.get(z, set()) for _, _, z in named_sizes)))
    if found:
        # of two as long, the later: the head noun comes last ("粗针织盖毯" is a 盖毯, not 针织 knitwear)
        start, end, phrase = max(found, key=lambda m: (m[1] - m[0], m[0]))
        leaves = set(facets.category_aliases.get(phrase) or facets.category_aliases_zh.get(phrase) or set())
        if COMPARISON.search(text):  # "compare the power bank and the travel adapter": both kinds
            kinds = [set(facets.category_aliases.get(o) or facets.category_aliases_zh.get(o) or set()) for *_, o in found]
            # not a generic word beside a narrower one ("lamp" beside "desk lamp", "毛巾" beside "浴巾")
            leaves = set().union(*(kind for kind in kinds if not any(other < kind for other in kinds)))
        out.categories = sorted(leaves)
        out.category_term = text[start:end]
        spans.append((start, end))

    parse_price(text, out)
    _parse_colour(text, facets, out)
    _parse_material(text, facets, out)
    _parse_size(message, text, facets, out, spans)
    if re.search(r"\bin stock\b|\bavailable (?:now|today|right now)\b|有货|现货|有库存", text):
        out.in_stock = True
    _parse_order(text, out)
    out.label = out.describe()
    return out


def _parse_colour(text: str, facets: Facets, out: Filters) -> None:
    words = list(COLOURS) + list(COLOUR_SYNONYMS)
    named = _longest(text, facets.colour_phrases)  # "green tea", "red rooibos": a product's or a kind's name
    hits = [COLOUR_SYNONYMS.get(p, p) for s, e, p in _longest(text, words)
            if not any(a <= s and e <= b for a, b, _ in named)]
    hits += [COLOUR_ZH[p] for _, _, p in _longest(text, COLOUR_ZH, words=False) if f"{p}色" in text or len(p) > 1]
    for colour in hits:
        catalog_value = facets.colors.get(colour)
        if catalog_value:
            out.color = catalog_value
            return
    if hits:
        out.missing.append(f"color {hits[0]}")


def _parse_material(text: str, facets: Facets, out: Filters) -> None:
    hits = [MATERIAL_SYNONYMS.get(p, p) for _, _, p in _longest(text, list(MATERIALS) + list(MATERIAL_SYNONYMS))]
    hits += [MATERIAL_ZH[p] for _, _, p in _longest(text, MATERIAL_ZH, words=False)]
    for material in hits:
        if facets.has_material(material):
            out.material = material
            return
    if hits:
        out.missing.append(f"material {hits[0]}")


def _parse_size(message: str, text: str, facets: Facets, out: Filters,
                spans: Sequence[tuple[int, int]] = ()) -> None:
    candidates: list[str] = []
    for match in re.finditer(r"\bsize\s+(extra large|extra small|xxl|xl|xs|s|m|l|\d+(?:/\d+)?|[a-z]{3,})\b", text):
        candidates.append(match.group(1))
    for match in re.finditer(r"\bin (?:an? |size )?(extra large|extra small|small|medium|large)\b", text):
        candidates.append(match.group(1))
    candidates += re.findall(r"(?<![\d.])(\d{2}/\d{2})(?![\d/])", text)  # waist/length, "34/32"
    # "34x32", "34 x 32": the same, when the catalog has that size (else it is more likely a measurement)
    candidates += [f"{a}/{b}" for a, b in re.findall(r"(?<![\d.])(\d{2})\s*[x×]\s*(\d{2})(?![\d.])", text)
                   if f"{a}/{b}" in facets.sizes]
    for match in re.finditer(r"\b(xs|s|m|l|xl|xxl)\s*(?:码|号)|(?<![a-z])(xs|s|m|l|xl|xxl)(?=码|号)", text):
        candidates.append(match.group(1) or match.group(2))
    candidates += [SIZE_ZH[p] for _, _, p in _longest(text, SIZE_ZH, words=False)]
    # sizes of three letters or more ("queen", "king", "bath sheet") are words of their own, but not inside the
    # category's name ("bath" in "bath towels"); so are "xs"/"xl"/"xxl" and the size words ("a sweater, medium")
    own = [s for s in facets.sizes if len(s) >= 3 and s.replace(" ", "").isalpha()]
    candidates += [p for s, e, p in _longest(text, own + list(SIZE_WORDS) + ["xs", "xl", "xxl"], plural=True)
                   if not any(a <= s and e <= b for a, b in spans)]
    for raw in candidates:
        key = raw.lower()
        options = [o for o in (facets.sizes.get(key), facets.sizes.get(SIZE_WORDS.get(key, "").lower()),
                               facets.sizes.get(SIZE_LETTERS.get(key, ""))) if o]
        # "large" is L for a sweater and Large for a basket, and so is "L" or "大号": the size the category has
        if out.categories:
            options = [o for o in options if facets.size_leaves.get(o.lower(), set()) & set(out.categories)]
        if options:
            out.size = options[0]
            return
    plausible = [c for c in candidates if c.lower() in SIZE_WORDS or re.fullmatch(r"x{0,2}[sml]|xl|\d+(?:/\d+)?", c.lower())]
    if plausible:
        out.missing.append(f"size {plausible[0]}")


def _parse_order(text: str, out: Filters) -> None:
    if re.search(r"cheapest|least expensive|lowest[- ]priced|最便宜|最实惠", text):
        out.order = "price_asc"
    elif re.search(r"most expensive|priciest|highest[- ]priced|最贵", text):
        out.order = "price_desc"
    count = re.search(r"\b(one|two|three|four|a couple of|a pair of|\d)\s+(?:of (?:your|the)\s+)?"
                      r"(?:cheapest|least expensive|most expensive|priciest)", text)
    if count:
        raw = count.group(1)
        out.count = int(raw) if raw.isdigit() else _WORDS_NUM[raw]
    else:
        zh = re.search(r"([两二三四\d])\s*(?:个|款|件|种)?\s*最(?:便宜|贵)", text)
        if zh:
            out.count = int(chinese_number(zh.group(1)) or 0) or None
