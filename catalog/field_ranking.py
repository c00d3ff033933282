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
* **Field words** (:data:`FIELD_WORDS`) name a field outright ("how many litres", "保修"); the ranking is for the
  questions they miss.
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
# Words that ask for a field by name, beyond the field's own name (which always counts)
FIELD_WORDS = {
    "material": ("made of", "made from", "material", "fabric", "pure cotton", "100% cotton", "what is it made",
                 "composition", "材质", "材料", "什么做的", "成分", "是纯棉", "纯棉吗", "纯棉的吗"),
    "capacity": ("capacity", "litre", "liter", "litres", "liters", "how much water", "how many cups", "容量", "几升", "多少升"),
    "power": ("power", "watt", "watts", "wattage", "功率", "瓦"),
    "dimensions": ("dimensions", "how big", "measurements", "尺寸", "多大"),
    "weight": ("weight", "how heavy", "weigh", "重量", "多重"),
    "care": ("care", "wash", "washing", "washable", "machine washable", "machine wash", "clean", "iron", "洗", "保养"),
    "warranty": ("warranty", "guarantee", "保修", "质保", "保修期", "质保期"),
    "battery life": ("battery", "battery life", "续航", "电池"),
    "voltage": ("voltage", "volts", "电压"),
    "dishwasher safe": ("dishwasher", "洗碗机"),
    "brand": ("brand", "who makes", "品牌"),
    "price": ("price", "how much is", "cost", "价格", "多少钱"),  # "how much does it weigh/hold" asks no price
    "availability": ("in stock", "available", "availability", "有货", "库存"),
    "height": ("height", "how tall", "how high", "多高", "高度"),
    "width": ("width", "how wide", "多宽", "宽度"),
    "length": ("length", "长度", "多长"),
    "arm reach": ("reach", "how far"),
    "water resistance": ("waterproof", "water resistant", "water-resistant", "water resistance", "防水"),
    "heat resistance": ("heat resistant", "heat resistance", "how hot", "耐热", "耐多少度", "耐高温"),
    "weight per m²": ("gsm", "weight per m²", "克重"),
    "certification": ("certified", "certification", "certificate", "认证"),
    "pieces": ("how many pieces", "pieces", "几条", "几件", "几个", "多少件"),
    "thread count": ("thread count", "支数", "纱支"),
    "microwave safe": ("microwave", "微波炉"),
    "keeps hot": ("keep hot", "keeps hot", "keep drinks hot", "stay hot", "保温多久", "保温多长"),
    "age": ("how old", "what age", "几岁", "年龄"),
    "dimmable": ("dimmable", "dimmer", "调光", "调亮度"),
    "sockets": ("plug types", "plug type", "plugs", "插头类型"),
}
FIELD_ZH = {"material": "材质", "capacity": "容量", "power": "功率", "dimensions": "尺寸", "weight": "重量",
            "care": "保养方式", "warranty": "保修", "battery life": "续航", "voltage": "电压", "price": "价格",
            "availability": "库存", "brand": "品牌", "color": "颜色", "size": "尺码"}
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


def zh_field_words(name: str) -> str:
    """A field's Chinese name and Chinese field words ("weight" -> "重量 多重")."""
    words = [FIELD_ZH.get(name, ""), *(w for w in FIELD_WORDS.get(name, ()) if re.search(r"[\u4e00-\u9fff]", w))]
    return " ".join(dict.fromkeys(w for w in words if w))
