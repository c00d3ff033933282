"""An email address for the reply, when nobody from the team is online (issue 57, the customer while waiting).

A waiting customer is asked for an address only while no operator is online; the next message that is one is taken
(:func:`address_in`), stored on the conversation (``conversation_states.contact_email``, for operators) and
acknowledged with the address partly hidden (:func:`partly_hidden`). Logs keep it masked like any personal data
(core/pii.py). An address that fails the check is answered with a clear line asking for it again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.text import language_of

# An address-like token: printable ASCII around an @ (so "我的邮箱是a@b.com" yields "a@b.com").
_CANDIDATE = re.compile(r"[!-~]*@[!-~]*")
# The dot-atom form of RFC 5322 that mail providers accept: a local part of allowed characters with single dots
# between them, a domain of labels (letters, digits, inner hyphens) ending in a top-level domain of letters.
_LOCAL = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_ADDRESS = re.compile(rf"{_LOCAL}@(?:{_LABEL}\.)+[A-Za-z]{{2,63}}")
# Characters around an address that belong to the sentence, not to it.
_AROUND = "<>()[]{}\"'.,;:!?"
# A message is an address (and not a question that mentions one) when little else is in it: "my email is ...".
MAX_OTHER_CHARS = 60


@dataclass(frozen=True)
class Given:
    """What a message says as an address: ``address`` when it is a valid one, else ``valid`` is False."""

    address: str
    valid: bool


def valid_address(text: str) -> bool:
    """Whether ``text`` is one email address (RFC 5322 dot-atom, 254 characters at most, local part 64)."""
    local, _, _ = text.partition("@")
    return len(text) <= 254 and len(local) <= 64 and _ADDRESS.fullmatch(text) is not None


def address_in(text: str) -> Given | None:
    """The email address a short message gives (``valid``), or one it tries to give and that fails the check; None
    for a message that gives none (it goes to the chain as any message) or that says much more than an address."""
    candidates = [c.strip(_AROUND) for c in _CANDIDATE.findall(text)]
    candidates = [c for c in candidates if c]
    if len(candidates) != 1:
        return Given("", False) if len(candidates) > 1 and len(text) <= 2 * MAX_OTHER_CHARS else None
    other = _CANDIDATE.sub("", text).strip()
    if len(other) > MAX_OTHER_CHARS:
        return None
    candidate = candidates[0]
    return Given(candidate.lower() if valid_address(candidate) else "", valid_address(candidate))


def reply_language(text: str, history: Sequence[dict[str, str]]) -> str:
    """The language to answer a message giving an address in: its own words' ("我的邮箱是…"), else, for an address
    alone, the language of the customer's last message before it."""
    words = _CANDIDATE.sub("", text).strip()
    if not words:
        words = next((t["content"] for t in reversed(history) if t.get("role") == "user"), "")
    return language_of(words) if words else "en"


def partly_hidden(address: str) -> str:
    """The address as the customer is shown it back: the first letter of the local part, the domain whole
    (j***@example.com), so the customer recognises it and someone reading over their shoulder learns little."""
    local, _, domain = address.partition("@")
    return f"{local[:1]}***@{domain}" if local and domain else ""


_SAID = {
    "en": {"ask": "Nobody from our team is online right now. Leave your email address here and we will reply "
                  "within {days}.",
           "promised": "Nobody from our team is online right now; we will reply to {address} within {days}.",
           "days": "{n} business day", "days_many": "{n} business days",
           "thanks": "Thanks, we will reply to {address} within {days}, unless a colleague answers you here first.",
           "invalid": "That does not look like a complete email address (like name@example.com). Please send it "
                      "again."},
    "zh": {"ask": "目前没有同事在线。请在这里留下您的电子邮件地址，我们会在{days}内回复您。",
           "promised": "目前没有同事在线，我们会在{days}内回复到 {address}。",
           "days": "{n}个工作日", "days_many": "{n}个工作日",
           "thanks": "谢谢，我们会在{days}内回复到 {address}（如果同事先在这里回复您，则以这里为准）。",
           "invalid": "这看起来不是完整的电子邮件地址（例如 name@example.com），请重新发送。"},
}


def _days(said: dict[str, str], days: int) -> str:
    return (said["days"] if days == 1 else said["days_many"]).format(n=days)


def offline_line(days: int, shown_address: str = "", language: str = "en") -> str:
    """The waiting line's part when nobody is online: ask for an address, or say where the reply will go."""
    said = _SAID.get(language, _SAID["en"])
    if shown_address:
        return said["promised"].format(address=shown_address, days=_days(said, days))
    return said["ask"].format(days=_days(said, days))


def acknowledgement(address: str, days: int, language: str = "en") -> str:
    """What the customer reads once their address is taken (partly hidden)."""
    said = _SAID.get(language, _SAID["en"])
    return said["thanks"].format(address=partly_hidden(address), days=_days(said, days))


def not_an_address(language: str = "en") -> str:
    """What the customer reads when what they sent is not a valid address."""
    return _SAID.get(language, _SAID["en"])["invalid"]
