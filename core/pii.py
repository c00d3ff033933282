"""Personal data in messages: order numbers, emails, phone numbers. Detected to keep it out of the
shared cache, masked before anything is written to the log or shown in the console."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# Edges of ASCII tokens. Python's \b counts Chinese characters as word characters, so "订单NW-104233" has no
# boundary before "NW", and "请联系support@x.com" would give "请联系support" as the address's name.
ASCII_START = r"(?<![A-Za-z0-9_])"
ASCII_END = r"(?![A-Za-z0-9_])"
EMAIL_ADDRESS = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"

ORDER_ID = re.compile(ASCII_START + r"(?:NW-\d{6}|#?W\d{7}|(?:order|purchase|订单)\s*(?:number|no\.?|#|号)?\s*:?"
                      r"\s*#?\d{6,})" + ASCII_END, re.IGNORECASE)
NW_ORDER = re.compile(ASCII_START + r"NW-\d{6}" + ASCII_END, re.IGNORECASE)
EMAIL = re.compile(EMAIL_ADDRESS + ASCII_END)
PHONE = re.compile(r"(?<![A-Za-z0-9_-])\+?\d[\d\s().-]{7,}\d(?![A-Za-z0-9_-])")
LONG_NUMBER = re.compile(ASCII_START + r"\d{8,}" + ASCII_END)

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


def host_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, for logs, health checks and the console: never its user, password, path or
    query, where secrets ride (``redis://:password@host``, a webhook's token in its path)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "(unparsable URL)"
    if not parts.scheme or not host:
        return "(set)" if url else ""
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")
