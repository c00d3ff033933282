"""Personal data in messages: order numbers, emails, phone numbers. Detected to keep it out of the
shared cache, masked before anything is written to the log or shown in the console."""

from __future__ import annotations

import re

ORDER_ID = re.compile(r"\b(?:NW-\d{6}|#?W\d{7}|(?:order|purchase|订单)\s*(?:number|no\.?|#|号)?\s*:?\s*#?\d{6,})\b",
                      re.IGNORECASE)
NW_ORDER = re.compile(r"\bNW-\d{6}\b", re.IGNORECASE)
EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
PHONE = re.compile(r"(?<![\w-])\+?\d[\d\s().-]{7,}\d(?![\w-])")
LONG_NUMBER = re.compile(r"\b\d{8,}\b")

_PATTERNS = (("email", EMAIL), ("order", ORDER_ID), ("phone", PHONE), ("number", LONG_NUMBER))
# What :func:`mask` leaves in place of personal data.
MASKED = re.compile(r"\[(?:email|order|phone|number)\]")


def find_pii(text: str) -> list[str]:
    """The kinds of personal data present (empty when none)."""
    return [kind for kind, pattern in _PATTERNS if pattern.search(text)]


def mask(text: str) -> str:
    """Replace personal data with placeholders like ``[email]``; keeps the rest readable for operators."""
    for kind, pattern in _PATTERNS:
        text = pattern.sub(f"[{kind}]", text)
    return text


def order_ids(text: str) -> list[str]:
    return [m.upper() for m in NW_ORDER.findall(text)]
