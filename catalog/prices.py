"""Price bounds in a shopper's message: "under $50", "between 20 and 40", "30 to 50 bucks", "20 dollars or less",
"under fifty dollars", "50元以内", "两百元以内", "一百五十块钱以内", "价格在20到40之间", "预算八十块".

Numbers may be digits, English number words ("fifty", "a hundred and twenty") or Chinese numerals ("两百", "一千五").
A number followed by a unit of measure ("under 2 kg", "less than 1.5 l") is a size, not a price. Bounds are compared
with the catalog's prices as numbers: a bound in yuan on a catalog priced in dollars is not converted (see
:mod:`catalog.constraints`).
"""

from __future__ import annotations

import re
from typing import Protocol

_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
NUM = r"(\d+(?:\.\d+)?|[零〇一二两三四五六七八九十百千万]+)"
_UNIT_AFTER = re.compile(r"^\s*(?:l|ml|w|kw|v|cm|mm|m|kg|g|mah|hours?|h|pcs|pieces|litres?|liters?|watts?|x)\b", re.I)
_CN_CURRENCY = r"(?:元|块钱|块|美元|刀)"  # "块钱": the spoken form of 块
_EN_CURRENCY = r"(?:dollars?|bucks|usd)"

_ONES = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
         "seventeen": 17, "eighteen": 18, "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1000}
_NUMBER_WORD = "|".join([*_ONES, *_TENS, *_SCALES])
# a run of number words ("a hundred and twenty", "twenty-five"); "a"/"an" only before a scale ("a hundred")
_NUMBER_RUN = re.compile(rf"\b(?:an?\s+(?=(?:hundred|thousand)\b))?(?:{_NUMBER_WORD})"
                         rf"(?:(?:(?<=hundred)\s+and\s+|(?<=thousand)\s+and\s+|[\s-]+)(?:{_NUMBER_WORD}))*\b")


class PriceBounds(Protocol):
    price_min: float | None
    price_max: float | None
    currency: str


def chinese_number(text: str) -> float | None:
    """"两百" -> 200, "一千五" -> 1500, "三十" -> 30, "150" -> 150; None when it is not a number."""
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    if not text or any(ch not in _CN_DIGITS and ch not in _CN_UNITS for ch in text):
        return None
    total, section, digit, last_unit = 0, 0, 0, 0
    for ch in text:
        if ch in _CN_DIGITS:
            digit = _CN_DIGITS[ch]
        elif _CN_UNITS[ch] == 10000:
            total += (section + digit) * 10000
            section, digit, last_unit = 0, 0, 10000
        else:
            section += (digit or 1) * _CN_UNITS[ch]
            digit, last_unit = 0, _CN_UNITS[ch]
    if digit and last_unit >= 100 and len(text) > 1 and text[-2] in _CN_UNITS:
        digit *= last_unit // 10  # a digit right after 百/千 is the next place down: "一千五" is 1500, "两百五" 250
    return float(total + section + digit)


def english_number(words: str) -> int | None:
    """"fifty" -> 50, "a hundred and twenty" -> 120, "twenty-five" -> 25, "two thousand" -> 2000; None otherwise."""
    tokens = [t for t in re.split(r"[\s-]+", words.lower()) if t and t != "and"]
    if not tokens:
        return None
    if tokens[0] in ("a", "an"):
        if len(tokens) < 2 or tokens[1] not in _SCALES:
            return None
        tokens[0] = "one"
    total, current = 0, 0
    last = ""  # what came before: "twenty five" is 25, "fifty sixty" no number
    for token in tokens:
        if token in _ONES:
            if last == "one" or (last == "ten" and _ONES[token] >= 10):
                return None
            current += _ONES[token]
            last = "one"
        elif token in _TENS:
            if last in ("one", "ten"):
                return None
            current += _TENS[token]
            last = "ten"
        elif token in _SCALES:
            last = "scale"
            current = (current or 1) * _SCALES[token]
            if _SCALES[token] == 1000:
                total, current = total + current, 0
        else:
            return None
    return total + current


def with_digits(text: str) -> str:
    """English number words from ten up written as digits: "under fifty dollars" -> "under 50 dollars" ("at least
    one", "the two cheapest" stay words: a price is rarely written so, a count often)."""
    def digits(match: re.Match) -> str:
        value = english_number(match.group(0))
        return match.group(0) if value is None or value < 10 else str(value)
    return _NUMBER_RUN.sub(digits, text)


def parse_price(text: str, out: PriceBounds) -> None:
    """Set ``out``'s price bounds and currency from ``text`` (lower-case, single-spaced)."""
    text = with_digits(text)

    def number(raw: str, after: str) -> float | None:
        if _UNIT_AFTER.match(after):
            return None  # "under 2 kg", "less than 1.5 l": a size, not a price
        return chinese_number(raw)

    def currency(context: str) -> str:
        if "$" in context or re.search(rf"\b{_EN_CURRENCY}\b", context):
            return "USD"
        if re.search(r"元|块|rmb|cny|¥", context):
            return "CNY"
        return ""

    between = re.search(r"(?:between|from)\s*\$?" + NUM + r"\s*(?:and|to|-|–)\s*\$?" + NUM, text) or \
        re.search(r"\$" + NUM + r"\s*(?:-|–|to)\s*\$?" + NUM, text) or \
        re.search(r"(?<![\d/])" + NUM + r"\s*(?:-|–|to)\s*\$?" + NUM + rf"\s*{_EN_CURRENCY}\b", text) or \
        re.search(NUM + rf"\s*{_CN_CURRENCY}?\s*(?:到|至|-|–)\s*" + NUM + rf"\s*(?:{_CN_CURRENCY}|之间)", text)
    if between:
        low, high = chinese_number(between.group(1)), number(between.group(2), text[between.end(2):])
        if low is not None and high is not None:
            out.price_min, out.price_max = min(low, high), max(low, high)
            out.currency = currency(text[max(0, between.start() - 2):between.end() + 8])
            return
    unit = rf"\s*(?:{_EN_CURRENCY}|{_CN_CURRENCY})?\s*"
    patterns = [
        (r"(?:under|below|less than|cheaper than|up to|at most|no more than|not more than|max(?:imum)?|within|"
         r"<)\s*(?:of\s*)?(?:\$|usd\s*)?" + NUM, "max"),
        # "20 dollars or less", "$50 and under": the bound before its keyword
        (r"\$?" + NUM + unit + r"(?:or|and) (?:less|under|below|cheaper|lower)\b", "max"),
        (r"\$?" + NUM + unit + r"(?:or|and) (?:more|over|above|up)\b", "min"),
        (r"(?<!no )(?<!not )(?:over|above|more than|at least|min(?:imum)?|>)\s*(?:\$|usd\s*)?" + NUM, "min"),
        (NUM + rf"\s*{_CN_CURRENCY}?\s*(?:以内|以下|之内|内)", "max"),
        (r"(?:低于|不超过|少于|不到|最多|便宜于|预算(?:是|在|为|只有)?)\s*" + NUM, "max"),
        (NUM + rf"\s*{_CN_CURRENCY}?\s*以上", "min"),
        (r"(?<!不)(?:高于|超过|多于|至少)\s*" + NUM, "min"),
    ]
    for pattern, side in patterns:
        for match in re.finditer(pattern, text):
            # the unit check reads what follows the number itself ("under 2 kg", "2 kg or less")
            value = number(match.group(1), text[match.end(1):])
            if value is None:
                continue
            if side == "max":
                out.price_max = value
            else:
                out.price_min = value
            out.currency = out.currency or currency(text[max(0, match.start() - 2):match.end() + 8])
            break
