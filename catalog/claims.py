"""What an answer says about products, checked against the product records: the one interface the answer check
(chains/verify.py) reaches the catalog through.

:class:`ProductClaims` is built for one advice turn from its candidate products (catalog/advice.py). Its
:meth:`~ProductClaims.unmatched` reads an answer sentence by sentence and returns every claim no record backs:

* ``product``: a product name the answer makes up ("the Lavender Kettle"): capitalised words before a kind the catalog
  sells, some of which are in no candidate's title, colour, material or kind;
* ``price``: an amount ($59.90, ¥200, 200元, 59.90 USD) that is neither a price nor a sale price of the products the
  sentence names (of any candidate when it names none), nor an amount of the customer's own message (their budget);
* ``attribute``: a material ("wool", "纯棉") or a measured value ("2.2 L", "3000 W", "130 cm") that the record of no
  product the sentence is about states, and "in stock" / "out of stock" said of a product that is not so.

* ``judgement``: the customer's yes-or-no question said back as its own answer ("is the wool blanket good for
  sensitive skin?" answered "The wool blanket is good for sensitive skin."): every word of the sentence but the
  products' names is the customer's, so nothing in a record backs it.

A sentence is about the candidates it names (at least half of a title's own words, as the catalog's search reads a
name); a sentence that names none is about all of them. A material said with a negation ("not wool", "wool-free")
is no claim that the product is of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from catalog.constraints import MATERIAL_SYNONYMS, MATERIAL_ZH, MATERIALS
from catalog.search import ProductSearch, base_title
from catalog.store import CatalogProduct
from core.text import han_bigrams

_SENTENCES = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;])|\n+")
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_MONEY = re.compile(rf"[$¥€£]\s?({_NUMBER})|({_NUMBER})\s?(?:usd|cny|rmb|dollars?|yuan|元|块|美元)",
                    re.IGNORECASE)
# Measured values: a number (or "130 x 170") and its unit; the unit's canonical name is the key compared
_UNITS = {"l": "l", "litre": "l", "litres": "l", "liter": "l", "liters": "l", "升": "l", "ml": "ml", "w": "w",
          "watt": "w", "watts": "w", "瓦": "w", "kw": "kw", "v": "v", "volt": "v", "volts": "v", "cm": "cm", "mm": "mm",
          "kg": "kg", "g": "g", "mah": "mah", "hours": "h", "hour": "h", "h": "h", "小时": "h", "cups": "cup",
          "cup": "cup"}
_MEASURE = re.compile(rf"({_NUMBER})((?:\s*[x×]\s*{_NUMBER})*)\s*"
                      r"(litres?|liters?|l|ml|watts?|kw|w|volts?|v|cm|mm|kg|g|mah|hours?|h|cups?|升|瓦|小时)"
                      r"(?![a-z])", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no|non|without|isn'?t|aren'?t|free of)\b[\w\s%-]{0,20}$|不是|没有|非$", re.IGNORECASE)
_OUT_OF_STOCK = re.compile(r"\bout of stock\b|\bsold out\b|\bunavailable\b|缺货|售罄|无货", re.IGNORECASE)
_IN_STOCK = re.compile(r"(?<!out of )\bin stock\b|\bavailable now\b|有货|现货", re.IGNORECASE)
# Words that start a sentence capitalised without naming anything
_OPENERS = frozenset({"the", "our", "this", "these", "that", "those", "a", "an", "yes", "no", "any", "both", "each",
                      "all", "most", "some", "for", "if", "with", "as", "and", "but", "or", "i", "we", "you", "it",
                      "my", "your", "its", "their", "here", "there", "also", "so", "then", "what", "which"})
# "down" is a filling and a word of every other sentence ("down to $50"): not read as a claim
_MATERIAL_TERMS = sorted({*MATERIALS, *MATERIAL_SYNONYMS} - {"down"}, key=len, reverse=True)


@dataclass(frozen=True)
class ProductClaim:
    kind: str     # product | price | attribute
    text: str     # what the answer says
    detail: str   # why no record backs it


class ProductClaims:
    """The product claims an answer may make: those the candidates' records back (see the module docstring)."""

    def __init__(self, search: ProductSearch, candidates: Iterable[CatalogProduct], message: str = ""):
        self.search = search
        self.candidates = list(candidates)
        groups = {p.group for p in self.candidates}
        # Every variant of a candidate: a price or colour of another size of the same product is still its own
        self.variants = {p.group: list(search.titles.groups.get(p.group, [])) or [p]
                         for p in self.candidates}
        self._groups = groups
        # What the customer said themselves (a budget, "a 2 L kettle") may be said back
        self.message_amounts = {_amount(m) for m in _MONEY.finditer(message)}
        self.message_measures = _measures(message.lower())
        # A yes-or-no question's own words: a sentence made only of them (and names) answers it with itself
        self.asked = _stems(message) if _YES_NO.search(message) else set()
        self.named = set().union(*(_stems(" ".join([p.title, p.title_zh, p.category, p.product_type]))
                                   for vs in self.variants.values() for p in vs)) if self.asked else set()
        facets = search.facets
        self.kind_words = {w for alias in facets.category_aliases for w in alias.split()}
        # Capitalised words (case-sensitive: a name) before a kind the catalog sells (any case: "kettle", "Kettle")
        self._kinds = re.compile(r"((?:[A-Z][\w'’&-]*\s+){1,5})(?i:" + "|".join(
            re.escape(k) for k in sorted(facets.category_aliases, key=len, reverse=True)) + r")\b") \
            if facets.category_aliases else None

    def unmatched(self, text: str) -> list[ProductClaim]:
        """Every product name, price or attribute value in ``text`` that no candidate's record backs."""
        found: list[ProductClaim] = []
        for sentence in _SENTENCES.split(text.replace("*", "")):
            if not sentence.strip():
                continue
            about = self._about(sentence)
            found += self._names(sentence)
            found += self._prices(sentence, about)
            found += self._attributes(sentence, about)
            found += self._judgement(sentence)
        return found

    # ---- what a sentence is about ---------------------------------------------------------------
    def _about(self, sentence: str) -> list[CatalogProduct]:
        named = [p for p in self.search.named(sentence, by_measure=False) if p.group in self._groups]
        groups = {p.group for p in named}
        return [v for g in groups for v in self.variants[g]] if named else \
            [v for vs in self.variants.values() for v in vs]

    # ---- claims -----------------------------------------------------------------------------------
    def _names(self, sentence: str) -> list[ProductClaim]:
        """Capitalised words before a kind the catalog sells that are in no candidate's record: a made-up name."""
        if self._kinds is None:
            return []
        known = set()
        for products in self.variants.values():
            for p in products:
                known |= _words(" ".join([p.title, p.color, p.material, p.category, p.brand, p.product_type]))
        found = []
        for match in self._kinds.finditer(sentence):
            words = [w for w in re.findall(r"[\w'’&-]+", match.group(1))]
            at_start = not sentence[:match.start()].strip()
            if at_start and words and words[0].lower() in _OPENERS:
                words = words[1:]
            elif at_start and len(words) == 1:
                continue  # "Electric kettles are ...": a capital that only starts the sentence
            own = [w for w in words if w.lower() not in _OPENERS and w.lower() not in self.kind_words]
            unknown = [w for w in own if not (_words(w) <= known)]
            if unknown:
                found.append(ProductClaim("product", match.group(0).strip(),
                                          f"names no candidate product ({', '.join(unknown)} is in none of their "
                                          "records)"))
        return found

    def _prices(self, sentence: str, about: list[CatalogProduct]) -> list[ProductClaim]:
        prices = {round(v, 2) for p in about for v in (p.price, p.sale_price) if v is not None}
        found = []
        for match in _MONEY.finditer(sentence):
            amount = _amount(match)
            if amount is None or amount in prices or amount in self.message_amounts:
                continue
            found.append(ProductClaim("price", match.group(0).strip(), "is the price or sale price of none of "
                                      + (", ".join(sorted({base_title(p) for p in about})) or "the candidates")))
        return found

    def _attributes(self, sentence: str, about: list[CatalogProduct]) -> list[ProductClaim]:
        found = []
        records = [_record_text(p) for p in about]
        lowered = sentence.lower()
        for term in _materials(lowered):
            name, start = term
            if _NEGATION.search(lowered[:start]) or re.match(r"[\s-]*free\b", lowered[start + len(name):]):
                continue
            wanted = MATERIAL_SYNONYMS.get(name, MATERIAL_ZH.get(name, name))
            if not any(re.search(rf"(?<![a-z]){re.escape(wanted)}", r) or name in r for r in records):
                found.append(ProductClaim("attribute", name, "no record of the products it is about states this "
                                                              "material"))
        measures = set().union(*(_measures(r) for r in records)) if records else set()
        for match in _MEASURE.finditer(sentence):
            said = _measures(match.group(0))
            if said and not said <= measures and not said <= self.message_measures:
                found.append(ProductClaim("attribute", match.group(0).strip(), "no record of the products it is "
                                                                                "about states this value"))
        if about and _OUT_OF_STOCK.search(sentence) and all(p.availability == "in_stock" for p in about):
            found.append(ProductClaim("attribute", "out of stock", "the products it is about are in stock"))
        elif about and _IN_STOCK.search(sentence) and not _OUT_OF_STOCK.search(sentence) \
                and not any(p.availability == "in_stock" for p in about):
            found.append(ProductClaim("attribute", "in stock", "none of the products it is about is in stock"))
        return found


    def _judgement(self, sentence: str) -> list[ProductClaim]:
        """The question said back as the answer: the sentence's words, less the candidates' names and kinds, are all
        the customer's own (three or more stems: "good", "sensitive", "skin"), and none says no."""
        if not self.asked or _SAYS_NO.search(sentence):
            return []
        said = _stems(sentence) - self.named - {_stem(w) for w in self.kind_words}
        if len(said) < 2 or not said <= self.asked:
            return []
        return [ProductClaim("judgement", sentence.strip()[:80], "says the customer's question back as its answer; "
                                                                 "no record states it")]


_SAYS_NO = re.compile(r"\b(?:not|no|never|isn'?t|aren'?t|doesn'?t|don'?t|cannot|can'?t|unlikely)\b|不|没",
                      re.IGNORECASE)
# "is it good for…?", "does it…?", "can I…?", "…吗？": a question a yes or no answers
_YES_NO = re.compile(r"^\W*(?:is|are|does|do|did|can|could|will|would|should|has|have)\b|吗\s*[？?]?\s*$|是不是|"
                     r"能不能|可不可以|适不适合|会不会", re.IGNORECASE)
_FILLER = frozenset(("the", "and", "for", "you", "your", "our", "this", "that", "its", "it's", "with", "very", "yes",
                     "are", "was", "has", "have", "does", "will", "would", "can", "could", "should", "also", "all",
                     "any", "one", "both", "which", "they", "them", "their", "these", "those", "is", "be", "a", "an",
                     "of", "to", "in", "on", "it", "as", "so", "i", "we", "my", "me", "us", "indeed", "definitely",
                     "great", "choice", "option", "perfect", "absolutely", "certainly", "sure"))


def _stem(word: str) -> str:
    return word[:5] if word.isascii() else word


def _stems(text: str) -> set[str]:
    """Content words by their first five letters, and Chinese as character bigrams."""
    words = {_stem(w.lower()) for w in re.findall(r"[A-Za-z][A-Za-z'-]+", text) if w.lower() not in _FILLER}
    return words | han_bigrams(text)


def _amount(match: re.Match) -> float | None:
    raw = (match.group(1) or match.group(2) or "").replace(",", "")
    try:
        return round(float(raw), 2)
    except ValueError:
        return None


def _measures(text: str) -> set[tuple[float, str]]:
    out = set()
    for match in _MEASURE.finditer(text):
        unit = _UNITS.get(match.group(3).lower(), match.group(3).lower())
        for number in [match.group(1), *re.findall(_NUMBER, match.group(2) or "")]:
            try:
                out.add((round(float(number.replace(",", "")), 3), unit))
            except ValueError:
                continue
    return out


def _materials(lowered: str) -> list[tuple[str, int]]:
    """The material words of a sentence, longest first ("stainless steel" before "steel"), with where they start."""
    taken: list[tuple[int, int]] = []
    out = []
    for term in [*_MATERIAL_TERMS, *sorted(MATERIAL_ZH, key=len, reverse=True)]:
        pattern = re.escape(term) if not term.isascii() else rf"(?<![a-z]){re.escape(term)}(?![a-z])"
        for match in re.finditer(pattern, lowered):
            if not any(s < match.end() and match.start() < e for s, e in taken):
                taken.append(match.span())
                out.append((term, match.start()))
    return out


def _record_text(product: CatalogProduct) -> str:
    return " ".join([product.title, product.title_zh, product.description, product.description_zh, product.material,
                     product.color, product.size, product.category,
                     " ".join(f"{k} {v}" for k, v in product.attributes.items())]).lower()


def _words(text: str) -> set[str]:
    return {w.lower().strip("'’") for w in re.findall(r"[\w'’&-]+", text) for w in [w, *w.split("-")] if w}
