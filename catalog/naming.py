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


def named_products(message: str, products: list[CatalogProduct], facets: Facets,
                   by_material: bool = False) -> dict[str, tuple[tuple[int, float], CatalogProduct]]:
    """The products ``message`` names by title, by item group: ((hits, share), the group's best named variant)."""
    zh = bool(_CJK.search(message))
    words = _zh_units(message) if zh else content_words(message)
    kinds = parse(message, facets).categories if by_material else []
    # A product is named when at least half of its title's own words (not its kind: "kettle", "towels") are in
    # the message: "the family kettle" names the Family Electric Kettle, "your towels" names no towel. In Chinese,
    # a quarter of its Chinese title's own character pairs ("家庭电水壶" names 家庭大容量电水壶 2.2 升).
    share = 0.25 if zh else 0.5
    named: dict[str, tuple[tuple[int, float], CatalogProduct]] = {}
    for p in products:
        own = own_zh(p, facets) if zh else own_words(p, facets)
        hits = len(own & words)
        # a material alone ("cotton" in "are your towels pure cotton?") is a question about it, not a name
        telling = {w for w in own & words if not _material_unit(w, zh, facets)}
        if by_material and p.category in kinds:
            telling = own & words
        if own and hits and (hits == len(own) or (telling and hits / len(own) >= share)):
            rank = (hits, hits / len(own))
            if p.group not in named or rank > named[p.group][0]:
                named[p.group] = (rank, p)
    return named


def own_words(p: CatalogProduct, facets: Facets) -> set[str]:
    """The words of a product's title that are not its kind's (a word of another kind's name counts: "oven" in
    the Cast Iron Dutch Oven, not an oven mitt), nor numbers and units."""
    kind = set().union(*(content_words(a) for a, leaves in facets.category_aliases.items()
                         if p.category in leaves or " " not in a))
    own = {w for w in content_words(base_title(p)) - kind if not w.replace(".", "").isdigit()}
    return own - {"l", "ml", "pc", "pcs", "m"}


def own_zh(p: CatalogProduct, facets: Facets) -> set[str]:
    """The character pairs (and Latin words and numbers: "LED", "1.7") of a product's Chinese title up to its
    colour, less its kind's name ("电水壶", "盖毯")."""
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
