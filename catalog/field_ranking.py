"""Which field a product fact question asks about when no field word names it ("how long is the USB-C cable?",
"what temperature can the oven mitts take?"): the attribute ranking (:func:`catalog.attributes.rank_attributes`,
the semiPQA ranker) chooses among the fields of the product's kind.

* **The candidates** are every field some product of the same kind states (material, colour, size, brand and its
  product_detail attributes), each ranked by this product's value, or, when this product lacks the field, by a
  sibling's value. A field only a sibling states is answered "not stated", never with the sibling's value: the
  question "does the glass kettle keep warm?" finds the kind's "keep warm" field, which the glass kettle's record
  lacks.
* **The question** is ranked without the words that name the product ("how many come in the?" for "how many tea
  towels come in the linen tea towel set?"): the product's name otherwise pulls toward the field its words are in
  ("linen" to material).
* **In Chinese** the candidates' names carry their Chinese names and field words (重量, 多重), since MiniLM reads
  Chinese poorly and the word-overlap signal needs them.
* **Field words** (:mod:`catalog.field_words`) name a field outright ("how many litres", "保修"); the ranking is for
  the questions they miss.
* **The floor**: the pick is taken only when its fused score is at least :data:`RANKED_FLOOR` and ahead of the next
  field's by :data:`RANKED_MARGIN`; otherwise no field (the caller keeps its behaviour without one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from catalog.attributes import content_words, rank_attributes
from catalog.store import CatalogProduct
from core.encoders import Encoder

# Fitted on the catalog set's dev split only (docs/catalog.md): each of its 68 fact and missing-field questions that
# names its product, ranked this way as if no field word matched. At 0.4 and 0.1 the 36 picks taken are all right and
# none states a value for a field the record lacks; at 0.3 and 0.1, 40 taken, 2 of them such guesses; with no margin,
# Chinese questions' picks (MiniLM reads Chinese poorly) are mostly wrong and close to the runner-up.
RANKED_FLOOR = 0.4
RANKED_MARGIN = 0.1
BASIC_FIELDS = ("material", "color", "size", "brand")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9'-]*|[^a-z0-9\s]", re.I)


@dataclass
class RankedField:
    name: str
    value: str  # this product's value; "" when its record lacks the field (answered "not stated")
    score: float
    margin: float  # ahead of the next field by this much

    @property
    def confident(self) -> bool:
        return self.score >= RANKED_FLOOR and self.margin >= RANKED_MARGIN


def kind_fields(product: CatalogProduct, kind: Iterable[CatalogProduct]) -> list[tuple[str, str, bool]]:
    """(field, ranking value, stated by this product) for each field this product or one of its kind states."""
    siblings = [product, *(p for p in kind if p.id != product.id)]
    names = list(dict.fromkeys(n for p in siblings for n in (*BASIC_FIELDS, *p.attributes) if p.field_value(n)))
    out = []
    for name in names:
        own = product.field_value(name)
        out.append((name, own or next(p.field_value(name) for p in siblings if p.field_value(name)), bool(own)))
    return out


def without_name(question: str, name_words: set[str], name_zh: Iterable[str] = ()) -> str:
    """The question without the words that name the product: English words of ``name_words`` (content words), and
    Chinese characters in a two-character run shared with one of ``name_zh``."""
    pairs = {text[i:i + 2] for text in name_zh for i in range(len(text) - 1)}
    drop = [False] * len(question)
    for i in range(len(question) - 1):
        if _CJK.match(question[i]) and question[i:i + 2] in pairs:
            drop[i] = drop[i + 1] = True
    kept = "".join(ch for ch, gone in zip(question, drop) if not gone)
    words = [w for w in _TOKEN.findall(kept) if not (content_words(w) and content_words(w) <= name_words)]
    return " ".join(words)


def rank_field(question: str, fields: list[tuple[str, str, bool]], encoder: Encoder,
               zh_names: Callable[[str], str] | None = None,
               embed: Callable[[list[str]], np.ndarray] | None = None) -> RankedField | None:
    """The best of ``fields`` (:func:`kind_fields`) for ``question`` (already :func:`without_name`); None when there
    are none. ``zh_names``: a field's Chinese words, added to its name for a Chinese question."""
    if not fields or not question.strip():
        return None
    zh = bool(_CJK.search(question))
    labels = [f"{name} {zh_names(name)}".strip() if zh and zh_names else name for name, _, _ in fields]
    candidates = [(label, value) for label, (_, value, _) in zip(labels, fields)]
    ranked = rank_attributes(question, candidates, encoder, embed=embed)
    index, score = ranked[0]
    margin = score - ranked[1][1] if len(ranked) > 1 else score
    name, _, stated = fields[index]
    own = fields[index][1] if stated else ""
    return RankedField(name=name, value=own, score=score, margin=margin)


class EmbedCache:
    """Passage vectors of the candidates' texts, kept while the catalog's version is the same."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder
        self.version = -1
        self.vectors: dict[str, np.ndarray] = {}

    def embed(self, version: int) -> Callable[[list[str]], np.ndarray]:
        if version != self.version:
            self.vectors, self.version = {}, version

        def embed(texts: list[str]) -> np.ndarray:
            new = [t for t in dict.fromkeys(texts) if t not in self.vectors]
            if new:
                self.vectors.update(zip(new, self.encoder.encode_passages(new)))
            return np.stack([self.vectors[t] for t in texts])
        return embed
