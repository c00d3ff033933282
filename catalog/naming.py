"""Which products a message names by title: "the family kettle" is the Family Electric Kettle 2.2 L, "家庭电水壶" is
家庭大容量电水壶 2.2 升. Product facts, stock questions and comparisons find their products here."""

from __future__ import annotations

import re
from collections.abc import Iterable

from catalog.attributes import content_words
from catalog.constraints import COLOUR_ZH, MATERIAL_SYNONYMS, MATERIAL_ZH, Facets, Filters, parse
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
        # the numbers of each English title ("2.2" in the Family Electric Kettle 2.2 L), and which products have each
        self.figures: dict[str, frozenset[str]] = {}
        self.having_figure: dict[str, list[CatalogProduct]] = {}
        self.kind_groups: dict[str, set[str]] = {}  # product_type leaf -> its item groups
        self.kind_products: dict[str, list[CatalogProduct]] = {}  # product_type leaf -> its products, in catalog order
        self._group_counts: dict[tuple[str, str], int] = {}
        for p in products:
            self.groups.setdefault(p.group, []).append(p)
            self.kind_groups.setdefault(p.category, set()).add(p.group)
            self.kind_products.setdefault(p.category, []).append(p)
            self.figures[p.id] = frozenset(_NUMBER.findall(base_title(p)))
            for figure in self.figures[p.id]:
                self.having_figure.setdefault(figure, []).append(p)
            for language, own in (("en", own_words(p, facets)), ("zh", own_zh(p, facets))):
                self.own[language][p.id] = own
                for unit in own:
                    self.having[language].setdefault(unit, []).append(p)

    def groups_having(self, language: str, unit: str) -> int:
        """How many item groups' titles have ``unit`` among their own words."""
        key = (language, unit)
        if key not in self._group_counts:
            self._group_counts[key] = len({p.group for p in self.having[language].get(unit, ())})
        return self._group_counts[key]

    def candidates(self, language: str, units: set[str], figures: Iterable[str] = ()) -> list[CatalogProduct]:
        seen: dict[str, CatalogProduct] = {}
        for unit in sorted(units):  # sorted: products named as well come in the same order each run
            for p in self.having[language].get(unit, ()):
                seen.setdefault(p.id, p)
        for figure in sorted(figures):
            for p in self.having_figure.get(figure, ()):
                seen.setdefault(p.id, p)
        return list(seen.values())


def named_products(message: str, titles: TitleIndex, by_material: bool = False,
                   by_measure: bool = True) -> dict[str, tuple[tuple[int, float], CatalogProduct]]:
    """The products ``message`` names by title, by item group: ((hits, share), the group's best named variant).
    ``by_measure``: a number of a title with its unit names it (off where the number is what is checked: an answer's
    claim "holds 2.2 litres" does not name the 2.2 L kettle)."""
    facets = titles.facets
    zh = bool(_CJK.search(message))
    language = "zh" if zh else "en"
    words = _zh_units(message) if zh else content_words(message)
    parsed = parse(message, facets)
    kinds = parsed.categories
    # A product is named when at least half of its title's own words (not its kind: "kettle", "towels") are in
    # the message: "the family kettle" names the Family Electric Kettle, "your towels" names no towel. In Chinese,
    # a quarter of its Chinese title's own character pairs ("家庭电水壶" names 家庭大容量电水壶 2.2 升).
    # A number of an English title counts as one of those words when the message gives it with a unit ("the 2.2
    # litre kettle", "the 350ml mug"; not a count: "2 kettles"). Chinese titles' numbers are their own units already.
    share = 0.25 if zh else 0.5
    figures = set(_MEASURE.findall(message.lower())) if by_measure and not zh else set()
    named: dict[str, tuple[tuple[int, float], CatalogProduct]] = {}
    for p in titles.candidates(language, words, figures):
        own = titles.own[language][p.id]
        numbers = titles.figures.get(p.id, frozenset()) & figures if not zh else set()
        hits = len(own & words) + len(numbers)
        # a material alone ("cotton" in "are your towels pure cotton?") is a question about it, not a name, unless
        # no other product's title has it ("the percale duvet": the Percale Duvet Cover); nor is a word the titles
        # of three item groups or more share ("set" in "can you set the temperature", "electric")
        shared = {w for w in own & words if titles.groups_having(language, w) >= _SHARED}
        telling = {w for w in own & words - shared
                   if not _material_unit(w, zh, facets) or titles.groups_having(language, w) == 1} | numbers
        if by_material and p.category in kinds:
            telling = set(own & words - shared) | numbers
        if own and hits and (len(own & words) == len(own) or (telling and hits / len(own) >= share)):
            rank = (hits, hits / len(own))
            if p.group not in named or rank > named[p.group][0]:
                named[p.group] = (rank, p)
    if not named and kinds:
        # "the power bank", "the speaker": the kind's name names its one product when the catalog has only one;
        # "the cashmere jumper": so do the kind and a material right before it that only one of its products is
        # made of ("are your towels pure cotton?" asks the material of every towel)
        groups = set().union(*(titles.kind_groups.get(kind, set()) for kind in kinds))
        material = parsed.material if len(groups) > 1 and _before_kind(message, parsed) else ""
        if material:
            groups = {g for g in groups if all(re.search(r"(?<![a-z])" + re.escape(w) + r"(?![a-z])",
                                                         titles.groups[g][0].material.lower()) for w in material.split())}
        if len(groups) == 1:
            group = groups.pop()
            named[group] = ((0, 0.0), titles.groups[group][0])
    return named


def _before_kind(message: str, parsed: Filters) -> bool:
    """Whether the message's material word stands right before (or inside) its kind's name, at most a word between:
    "the cashmere jumper", "羊绒衫", "纯棉的盖毯"."""
    text = " ".join(message.lower().split())
    kind = text.find(parsed.category_term) if parsed.category_term else -1
    if kind < 0:
        return False
    forms = [parsed.material, *(k for k, v in MATERIAL_SYNONYMS.items() if v == parsed.material),
             *(k for k, v in MATERIAL_ZH.items() if v == parsed.material)]
    for form in forms:
        at = text.find(form)
        if 0 <= at <= kind + len(parsed.category_term) and len(re.findall(r"[a-z]+|[\u4e00-\u9fff]",
                                                                             text[at + len(form):kind])) <= 1:
            return True
    return False


def own_words(p: CatalogProduct, facets: Facets) -> frozenset[str]:
    """The words of a product's title that are not its kind's (a word of another kind's name counts: "oven" in
    the Cast Iron Dutch Oven, not an oven mitt), nor numbers and units. Kept on ``facets`` (one catalog version)."""
    key = ("en", base_title(p), p.category)
    if key not in facets.title_words:
        title = content_words(key[1])
        # a shopper's word for a kind that is also in this title stays its own: "the earbuds" names the Wireless
        # Earbuds, though "earbuds" is a word for headphones
        kind = _kind_words(p.category, facets) - (title & _synonym_words(facets))
        own = {w for w in title - kind if not w.replace(".", "").isdigit()}
        facets.title_words[key] = frozenset(own - {"l", "ml", "pc", "pcs", "m"})
    return facets.title_words[key]


def _kind_words(category: str, facets: Facets) -> frozenset[str]:
    key = ("kind", "", category)
    if key not in facets.title_words:
        facets.title_words[key] = frozenset(set().union(*(
            content_words(a) for a, leaves in facets.category_aliases.items() if category in leaves or " " not in a)))
    return facets.title_words[key]


def _synonym_words(facets: Facets) -> frozenset[str]:
    key = ("synonyms", "", "")
    if key not in facets.title_words:
        facets.title_words[key] = frozenset(content_words(" ".join(sorted(facets.synonym_words))))
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
_SHARED = 3  # a title word this many item groups share names none of them alone
_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?![\d.])")
_MEASURE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[\s-]*(?:l|lit(?:re|er)s?|ml|m|met(?:re|er)s?|mah|pcs?|pieces?|cm|kg|g|w)"
                      r"(?![a-z])")
_ZH_COLOUR_WORDS = frozenset(COLOUR_ZH) | {"橄榄绿"}


def _zh_units(text: str) -> set[str]:
    """Chinese character pairs of each run of Chinese characters, and the Latin words and numbers, lower-case."""
    units = {w for w in re.findall(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", text.lower())}
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        units |= {run[i:i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run}
    return units
