"""Personal data in messages: order numbers, tracking numbers, emails, phone numbers. Detected to keep it out of the
shared cache, masked before anything is written to the log or shown in the console.

Phones are matched by their written formats (international ``+CC ...``, North American ``(555) 123-4567`` /
``555.123.4567`` / ``555-1234``, Chinese mobiles, national numbers with a trunk ``0``), never by "a run of digits and
separators": that also swallowed ISO dates ("2026-12-04"). Amounts, dates, times, quantities and prices stay
readable (tests/unit/test_pii.py lists both sides).
"""

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
# Carrier tracking numbers: UPS "1Z" + 16 letters/digits; the demo shop's DHL "JD" + 18 digits
# (knowledge/demo/orders.csv); UPU S10 (USPS international, most postal services) "EC123456789US"; USPS 20-22
# digits, also written in groups of four; FedEx 12 or 15 digits (a bare 12/15-digit run is taken as one).
TRACKING = re.compile(ASCII_START + r"(?:1Z[0-9A-Z]{16}|JD\d{16,20}|[A-Z]{2}\d{9}[A-Z]{2}|\d{20,22}|\d{15}|\d{12}"
                      r"|9\d{3}(?: \d{4}){4}(?: \d{2})?|\d{4} \d{4} \d{4})" + ASCII_END, re.IGNORECASE)
# A phone starts where no word, "+", or "digit-dash"/"digit-dot" (a date or a decimal) precedes it, and ends
# where no word character or a further "-digit"/".digit" follows.
_PHONE_START = r"(?<![A-Za-z0-9_+])(?<!\d[.-])"
_PHONE_END = r"(?![A-Za-z0-9_])(?![.-]\d)"
_SEP = r"[ .-]?"
PHONE = re.compile(_PHONE_START + "(?:" + "|".join((
    r"\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}",     # +44 20 7946 0958, +1-555-123-4567
    r"(?:1[ .-])?(?:\(\d{3}\) ?|\d{3}" + _SEP + r")\d{3}" + _SEP + r"\d{4}",  # (555) 123-4567, 555.123.4567
    r"1[3-9]\d(?:[ -]?\d{4}){2}",                                              # 138 0013 8000, 13800138000
    r"\(?0\d{1,4}\)?[ .-]?\d{3,4}[ .-]?\d{3,4}",                               # 020 7946 0958, (030) 1234567
    r"[2-9]\d{2}-\d{4}",                                                       # 555-1234
    r"[2-9]\d{3} \d{4}",                                                       # 7946 0958, 9123 4567
)) + ")" + _PHONE_END)
LONG_NUMBER = re.compile(ASCII_START + r"\d{8,}" + ASCII_END)

_PATTERNS = (("email", EMAIL), ("order", ORDER_ID), ("tracking", TRACKING), ("phone", PHONE),
             ("number", LONG_NUMBER))
# What :func:`mask` leaves in place of personal data.
MASKED = re.compile(r"\[(?:email|order|tracking|phone|number)\]")


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
