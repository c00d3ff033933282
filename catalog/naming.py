"""Which products a message names by title: "the family kettle" is the Family Electric Kettle 2.2 L, "家庭电水壶" is
家庭大容量电水壶 2.2 升. Product facts, stock questions and comparisons find their products here."""

from __future__ import annotations

import re

from catalog.attributes import content_words
from catalog.constraints import COLOUR_ZH, MATERIAL_ZH, Facets, parse
from catalog.store import CatalogProduct


def base_title(product: CatalogProduct) -> str:
    """The title without the variant's " - Colour / Size" suffix."""
    return product.title.split(" - ")[0]


class TitleIndex:
    """Each product's own title words (English) and character pairs (Chinese), and which products have each one;
    the variants of each item group and the attribute names:
    built once per catalog version, so naming a product looks only at the products that share a word with the
    message (a scan of all of them cost ~40 ms a message at 10,000 products)."""

    def __init__(self, products: list[CatalogProduct], facets: Facets):
        self.facets = facets
        self.own: dict[str, dict[str, frozenset[str]]] = {"en": {}, "zh": {}}
        self.having: dict[str, dict[str, list[CatalogProduct]]] = {"en": {}, "zh": {}}
        self.groups: dict[str, list[CatalogProduct]] = {}  # item group -> its variants, in catalog order
        self.attribute_names = sorted({name for p in products for name in p.attributes})
        for p in products:
            self.groups.setdefault(p.group, []).append(p)
            for language, own in (("en", own_words(p, facets)), ("zh", own_zh(p, facets))):
                self.own[language][p.id] = own
                for unit in own:
                    self.having[language].setdefault(unit, []).append(p)

    def candidates(self, language: str, units: set[str]) -> list[CatalogProduct]:
        seen: dict[str, CatalogProduct] = {}
        for unit in units:
            for p in self.having[language].get(unit, ()):
                seen.setdefault(p.id, p)
        return list(seen.values())


def named_products(message: str, titles: TitleIndex,
                   by_material: bool = False) -> dict[str, tuple[tuple[int, float], CatalogProduct]]:
    """The products ``message`` names by title, by item group: ((hits, share), the group's best named variant)."""
    facets = titles.facets
    zh = bool(_CJK.search(message))
    language = "zh" if zh else "en"
    words = _zh_units(message) if zh else content_words(message)
    kinds = parse(message, facets).categories if by_material else []
    # A product is named when at least half of its title's own words (not its kind: "kettle", "towels") are in
    # the message: "the family kettle" names the Family Electric Kettle, "your towels" names no towel. In Chinese,
    # a quarter of its Chinese title's own character pairs ("家庭电水壶" names 家庭大容量电水壶 2.2 升).
    share = 0.25 if zh else 0.5
    named: dict[str, tuple[tuple[int, float], CatalogProduct]] = {}
    for p in titles.candidates(language, words):
        own = titles.own[language][p.id]
        hits = len(own & words)
        # a material alone ("cotton" in "are your towels pure cotton?") is a question about it, not a name
        telling = {w for w in own & words if not _material_unit(w, zh, facets)}
        if by_material and p.category in kinds:
            telling = set(own & words)
        if own and hits and (hits == len(own) or (telling and hits / len(own) >= share)):
            rank = (hits, hits / len(own))
            if p.group not in named or rank > named[p.group][0]:
                named[p.group] = (rank, p)
    return named


def own_words(p: CatalogProduct, facets: Facets) -> frozenset[str]:
    """The words of a product's title that are not its kind's (a word of another kind's name counts: "oven" in
    the Cast Iron Dutch Oven, not an oven mitt), nor numbers and units. Kept on ``facets`` (one catalog version)."""
    key = ("en", base_title(p), p.category)
    if key not in facets.title_words:
        kind = _kind_words(p.category, facets)
        own = {w for w in content_words(key[1]) - kind if not w.replace(".", "").isdigit()}
        facets.title_words[key] = frozenset(own - {"l", "ml", "pc", "pcs", "m"})
    return facets.title_words[key]


def _kind_words(category: str, facets: Facets) -> frozenset[str]:
    key = ("kind", "", category)
    if key not in facets.title_words:
        facets.title_words[key] = frozenset(set().union(*(
            content_words(a) for a, leaves in facets.category_aliases.items() if category in leaves or " " not in a)))
    return facets.title_words[key]


def own_zh(p: CatalogProduct, facets: Facets) -> frozenset[str]:
    """The character pairs (and Latin words and numbers: "LED", "1.7") of a product's Chinese title up to its
    colour, less its kind's name ("电水壶", "盖毯"). Kept on ``facets`` (one catalog version)."""
    key = ("zh", p.title_zh, p.category)
    if key not in facets.title_words:
        facets.title_words[key] = frozenset(_own_zh(p, facets))
    return facets.title_words[key]


def _own_zh(p: CatalogProduct, facets: Facets) -> set[str]:
    if not p.title_zh:
        return set()
    parts = []
    for part in p.title_zh.split():
        if part.endswith("色") or part in _ZH_COLOUR_WORDS:
            break
        parts.append(part)
    base = " ".join(parts)
    for alias in sorted((a for a, leaves in facets.category_aliases_zh.items() if p.category in leaves),
                        key=len, reverse=True):
        base = base.replace(alias, " ")
    units = _zh_units(base) - {"升", "米"}
    # numbers and units tell only when the title has nothing else ("电水壶 1.7 升": "1.7")
    return {u for u in units if _CJK.search(u)} or units


def _material_unit(unit: str, zh: bool, facets: Facets) -> bool:
    if not zh:
        return unit in facets.material_words
    return any(unit in word for word in MATERIAL_ZH)


_CJK = re.compile(r"[\u4e00-\u9fff]")
_ZH_COLOUR_WORDS = frozenset(COLOUR_ZH) | {"橄榄绿"}


def _zh_units(text: str) -> set[str]:
    """Chinese character pairs of each run of Chinese characters, and the Latin words and numbers, lower-case."""
    units = {w for w in re.findall(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", text.lower())}
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        units |= {run[i:i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run}
    return units
