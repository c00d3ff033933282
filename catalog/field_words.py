"""Which field a product question names: by the field's own name, a word for it (:data:`FIELD_WORDS`: "wattage",
"made of", "面料"), or a unit of one of the product's values ("how many mAh", "多少毫安").

When the message names a product (:func:`asked_field`'s ``product``), in this order:

1. the product's own field by its own name ("how many cups": the Family Kettle's ``cups``, not the capacity);
2. the field of the longest word for one; of words as long, a field the product states: "功率多大" asks the cable's
   power, not the dimensions "多大" asks of others; "gsm" is a T-shirt's fabric weight and a towel's weight per m²;
   a field word right before another ("battery weight", "电池容量") modifies it: the second is the field asked;
3. when the record lacks that field: that field, answered "not stated", never another field's value (issue 59: a
   field named and absent is not stated; no unit, own-field word or ranking may pick a stated one instead);
4. when no field word matched: a unit word ("how many mAh", "ohms", "多少毫安") that the unit of exactly one of the
   product's stated values shares;
5. or its own field by a word of the field's name that the message uses outside the product's name ("the
   temperatures you can set": ``temperature control``);
6. or, with a unit asked that none of its values has, the field the unit stands for (:data:`UNIT_FIELDS`), answered
   "not stated".

A unit asked rules out a value with no number in it of that measure (:func:`fits_units`): "how many mAh" is not
answered by a battery life of "20 hours" (the caller says "not stated").

A field word inside the product's own name is not the field asked ("noise cancelling" in the Noise-Cancelling
Headphones, "cable" in the USB-C Cable), unless the message uses it again ("the power output of the power bank"); nor
is a unit right after a number ("the 2.2 litre kettle"). Without a product, the longest word's field, of words as
long one that a product of the kind named states. English words also match with a suffix ("microwaveable",
"holds"); "*" in a word stands for one to three words ("keep * hot").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

from catalog.store import CatalogProduct
from core.text import compiled

# Words that ask for a field by name, beyond the field's own name (which always counts). One word may stand for
# several fields ("gsm"): the product's own field is taken (rule 2 above).
FIELD_WORDS = {
    "material": ("made of", "made from", "made out of", "material", "fabric", "pure cotton", "100% cotton",
                 "what is it made", "composition", "材质", "材料", "什么做的", "成分", "是纯棉", "纯棉吗", "纯棉的吗",
                 "面料", "布料", "什么料"),
    "capacity": ("capacity", "litre", "liter", "litres", "liters", "how much water", "how many cups", "hold", "容量",
                 "几升", "多少升", "装多少", "能装", "容积"),
    "power": ("power", "watt", "watts", "wattage", "power output", "功率", "瓦", "瓦数"),
    "dimensions": ("dimensions", "how big", "how large", "measurements", "尺寸", "多大", "大小"),
    "weight": ("weight", "how heavy", "heavy", "weigh", "重量", "多重", "多沉"),
    "care": ("care", "wash", "washing", "washable", "machine washable", "machine wash", "clean", "iron", "launder",
             "洗", "保养"),
    "warranty": ("warranty", "guarantee", "保修", "质保", "保修期", "质保期"),
    "battery life": ("battery", "battery life", "playback", "playtime", "play time", "续航", "电池", "能用多久",
                     "用多久", "待机"),
    "voltage": ("voltage", "volts", "电压", "多少伏", "伏数"),
    "dishwasher safe": ("dishwasher", "洗碗机"),
    "brand": ("brand", "who makes", "品牌"),
    "price": ("price", "how much is", "cost", "价格", "多少钱"),  # "how much does it weigh/hold" asks no price
    "availability": ("in stock", "available", "availability", "有货", "库存"),
    "height": ("height", "how tall", "how high", "多高", "高度"),
    "width": ("width", "how wide", "多宽", "宽度"),
    "length": ("length", "长度", "多长"),
    "arm reach": ("reach", "how far", "arm length", "多远", "伸多远", "臂长"),
    "water resistance": ("waterproof", "water resistant", "water-resistant", "water resistance", "防水"),
    "heat resistance": ("heat resistant", "heat resistance", "how hot", "耐热", "耐多少度", "耐高温"),
    "weight per m²": ("gsm", "weight per m²", "克重"),
    "fabric weight": ("gsm", "fabric weight", "克重"),
    "certification": ("certified", "certification", "certificate", "认证"),
    "pieces": ("how many pieces", "pieces", "how many * come in", "how many * in the", "how many * in a",
               "how many * are in", "几条", "几件", "几个", "多少件"),
    "thread count": ("thread count", "支数", "纱支"),
    "microwave safe": ("microwave", "微波炉"),
    "keeps hot": ("keep hot", "keeps hot", "keep * hot", "keep * warm", "stay hot", "保温多久", "保温多长", "保温"),
    "keep warm": ("keep warm", "keeps warm", "keep * warm", "keep * hot", "保温"),
    "age": ("how old", "what age", "几岁", "年龄"),
    "dimmable": ("dimmable", "dimmer", "调光", "调亮度"),
    "sockets": ("plug types", "plug type", "plugs", "插头类型"),
    "volume limit": ("how loud", "loud", "max volume", "decibels", "音量", "分贝"),
    "impedance": ("impedance", "ohm", "ohms", "阻抗"),
    "usb ports": ("usb ports", "ports", "port", "接口"),
    "firmness": ("firmness", "firm", "soft or firm", "how soft", "软硬", "硬度"),
    "hob": ("hob", "hobs", "induction", "stove", "gas", "电磁炉", "燃气灶", "灶"),
    "colour temperature": ("colour temperature", "color temperature", "色温"),
}
FIELD_ZH = {"material": "材质", "capacity": "容量", "power": "功率", "dimensions": "尺寸", "weight": "重量",
            "care": "保养方式", "warranty": "保修", "battery life": "续航", "voltage": "电压", "price": "价格",
            "availability": "库存", "brand": "品牌", "color": "颜色", "size": "尺码"}
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SUFFIX = r"(?:s|es|d|ed|ing)?"  # "holds", "washing"; and "able"/"ible" after a longer word: "microwaveable"

# Units as shoppers spell them (not single letters: "m" is a size) and as records write them, one key each
_UNIT_WORDS = {"mah": r"mah|milliamp(?:s|-hours?)?", "ohm": r"ohms?", "w": r"watts?", "v": r"volts?",
               "ml": r"ml|millilit(?:re|er)s?", "l": r"lit(?:re|er)s?", "kg": r"kg|kilos?|kilograms?", "g": r"grams?",
               "cm": r"cm|centimet(?:re|er)s?", "m": r"met(?:re|er)s?", "hours": r"hours?|hrs?",
               "minutes": r"minutes?|mins?", "db": r"db|decibels?"}
# Chinese units count only after 多少/几 ("多少瓦", "几个小时"): alone they are parts of other words (米色, 夹克, 欧标)
_UNIT_WORDS_ZH = {"mah": "毫安", "ohm": "欧姆?", "w": "瓦", "v": "伏", "ml": "毫升", "l": "升", "kg": "公斤|千克",
                  "g": "克", "cm": "厘米", "m": "米", "hours": "小时", "minutes": "分钟", "db": "分贝"}
# Units of one measure: a value in any of them answers a question asked in another ("how many ml" of "1.7 L")
_MEASURES = ({"mah"}, {"ohm"}, {"w"}, {"v"}, {"ml", "l"}, {"kg", "g"}, {"cm", "m"}, {"hours", "minutes"}, {"db"})
# The field a unit asks for, named in a "not stated" answer when the value found is of another measure
UNIT_FIELDS = {"mah": "capacity", "ohm": "impedance", "w": "power", "v": "voltage", "ml": "capacity", "l": "capacity",
               "kg": "weight", "g": "weight", "cm": "dimensions", "m": "length", "hours": "duration",
               "minutes": "duration", "db": "volume limit"}
_VALUE_UNITS = {"mah": r"mah", "ohm": r"ohms?|Ω", "w": r"w", "v": r"v", "ml": r"ml", "l": r"l", "kg": r"kg",
                "g": r"g", "cm": r"cm", "m": r"m", "hours": r"hours?|h", "minutes": r"minutes?|min",
                "db": r"db"}
# Words of field names too common to name a field alone (rule 4)
_GENERIC = frozenset(["safe", "life", "limit", "control", "count", "per", "m²", "type", "types", "resistance",
                      "weight", "colour", "color", "size", "water", "fabric", "keep", "keeps", "auto", "shut", "off",
                      "of", "the", "and"])


def asked_field(message: str, field_names: Iterable[str], product: CatalogProduct | None = None,
                name: str = "", kind: Iterable[CatalogProduct] = ()) -> str:
    """The field ``message`` asks about ("" when it names none). ``field_names``: the catalog's attribute names;
    ``product``: the product the message names best, ``name`` its title words (English and Chinese); ``kind``: with
    no product, the products of the kind it names, whose stated fields go first as a product's do (rule 2)."""
    text = " " + " ".join(message.lower().split()).replace("-", " ") + " "
    title = " " + " ".join(name.lower().split()).replace("-", " ") + " "
    names = sorted(set(FIELD_WORDS) | set(field_names))  # sorted: ties go the same way each run
    matches: list[tuple[str, str, list[int]]] = []  # (field, phrase, where in the text)
    for field in names:
        for phrase in dict.fromkeys((field, *FIELD_WORDS.get(field, ()))):
            phrase = phrase.replace("-", " ")
            starts = _find(phrase, text)
            if starts and _is_unit(phrase):  # "the 2.2 litre kettle": a measure given, not the field asked
                starts = [i for i in starts if not re.search(r"\d\s*$", text[:i])]
            if starts and len(starts) > len(_find(phrase, title)):
                matches.append((field, phrase, starts))
    if product is None:
        products = list(kind)
        return _longest(matches, lambda field: any(p.field_value(field) for p in products))
    own = set(product.attributes)
    by_name = [m for m in matches if m[1] == m[0].replace("-", " ") and m[0] in own]
    if by_name:
        return _longest(by_name)
    if matches:  # rules 2 and 3: a field named, stated or not; never a stated one in place of one the record lacks
        return _longest(_heads(matches, text), lambda field: bool(product.field_value(field)))
    found = _unit_field(text, product) or _by_a_word_of_its_name(text, title, product)
    if found or any(fits_units(message, str(v)) for v in product.attributes.values()):
        return found  # several values in the unit: the ranking picks among them ("how many cm wide")
    # a unit no stated value has still names a field: "how many mAh is the cable?" is "not stated", not ranked
    return unit_field(message)


def _heads(matches: list[tuple[str, str, list[int]]], text: str) -> list[tuple[str, str, list[int]]]:
    """``matches`` less the field words that only modify the next one ("battery" in "battery weight", "电池" in
    "电池容量"); a Chinese question word after a field word ("功率多大") asks about that field, so it is no head."""
    def modifies(phrase: str, starts: list[int]) -> bool:
        ends = {i + len(phrase) for i in starts}
        nouns = [(other, at) for _, other, at in matches
                 if other != phrase and not other.startswith(("多", "几", "是", "能", "什么"))
                 and bool(_CJK.search(other)) == bool(_CJK.search(phrase))]
        return any(j == e or (j == e + 1 and text[e] == " ") for e in ends for _, at in nouns for j in at)
    heads = [m for m in matches if not modifies(m[1], m[2])]
    return heads or matches


@functools.lru_cache(maxsize=256)  # one fact question reads it for the field, then for each of the product's values
def asked_units(message: str) -> frozenset[str]:
    """The units ``message`` asks in ("how many watts", "多少毫安"); not one right after a number, which is a measure
    given ("the 2.2 litre kettle")."""
    text = " " + " ".join(message.lower().split()).replace("-", " ") + " "
    asked = {unit for unit, words in _UNIT_WORDS.items()
             for m in re.finditer(r"(?<![a-z])(?:" + words + r")(?![a-z])", text)
             if not re.search(r"\d\s*$", text[:m.start()])}
    return frozenset(asked | {unit for unit, words in _UNIT_WORDS_ZH.items()
                              if re.search(r"(?:多少|几)个?(?:" + words + ")", text)})


def fits_units(message: str, value: str) -> bool:
    """Whether ``value`` can answer ``message``'s unit: True when it asks in none, else when the value has a number in
    a unit of the same measure ("how many ml" and "1.7 L"; not "how many mAh" and "20 hours")."""
    asked = asked_units(message)
    if not asked:
        return True
    measure = {u for group in _MEASURES if group & asked for u in group}
    low = str(value).lower()
    return any(re.search(r"\d\s*(?:" + _VALUE_UNITS[u] + r")(?![a-z])", low) for u in measure)


def unit_field(message: str) -> str:
    """The field a unit asked names ("how many watts": power), for a "not stated" answer; "" when none is asked."""
    return next((UNIT_FIELDS[u] for u in sorted(asked_units(message))), "")


def _find(phrase: str, text: str) -> list[int]:
    """Where ``phrase`` starts in ``text``; "*" in a phrase stands for one to three words ("keep * hot")."""
    if _CJK.search(phrase):
        return [m.start() for m in compiled(re.escape(phrase)).finditer(text)]
    pattern = re.escape(phrase).replace(r"\ \*\ ", r" (?:[a-z']+ ){1,3}")
    suffix = _SUFFIX[:-2] + "|able|ible)?" if len(phrase) >= 6 else _SUFFIX
    return [m.start() for m in compiled(r"(?<![a-z0-9])" + pattern + suffix + r"(?![a-z0-9])").finditer(text)]


@functools.cache  # the phrases are FIELD_WORDS' and the catalog's field names: a few hundred, asked per message
def _is_unit(phrase: str) -> bool:
    return any(compiled(words).fullmatch(phrase) for words in _UNIT_WORDS.values())


def _longest(matches: list[tuple[str, str, list[int]]], stated: Callable[[str], bool] = lambda field: False) -> str:
    """The field of the longest phrase; of phrases as long, one of a field ``stated`` says the product states."""
    best = ""
    best_key = (0, False)
    for field, phrase, _ in matches:
        key = (len(phrase), stated(field))
        if key > best_key:
            best, best_key = field, key
    return best


def _unit_field(text: str, product: CatalogProduct) -> str:
    """The one stated field whose value's unit the message asks in ("how many mAh" -> capacity "10000 mAh"); a unit
    right after a number is a name or a constraint ("the 2.2 litre kettle"), not the unit asked."""
    asked = asked_units(text)
    if not asked:
        return ""
    fields = [n for n in product.attributes if any(
        re.search(r"\d\s*(?:" + _VALUE_UNITS[u] + r")(?![a-z])", str(product.attributes[n]).lower()) for u in asked)]
    return fields[0] if len(fields) == 1 else ""


def _by_a_word_of_its_name(text: str, title: str, product: CatalogProduct) -> str:
    """The product's own field by a word of its name the message uses outside the product's name (only when no field
    word matched: a field named that the record lacks is "not stated")."""
    words = set(re.findall(r"[a-z]+", text))
    found = []
    for field in product.attributes:
        if len(field.split()) < 2 or not product.field_value(field):
            continue  # a one-word field is matched by its whole name already
        parts = [w for w in re.findall(r"[a-z]+", field.lower()) if w not in _GENERIC and len(w) > 2]
        for part in parts:
            forms = {part, part + "s", part.rstrip("s")}
            if any(f in words and len(_find(f, text)) > len(_find(f, title)) for f in forms):
                found.append(field)
    return found[0] if len(set(found)) == 1 else ""


def zh_field_words(name: str) -> str:
    """A field's Chinese name and Chinese field words ("weight" -> "重量 多重")."""
    words = [FIELD_ZH.get(name, ""), *(w for w in FIELD_WORDS.get(name, ()) if _CJK.search(w))]
    return " ".join(dict.fromkeys(w for w in words if w))
