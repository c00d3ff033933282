"""Input guard: the first stage. Refuses what no later stage should see, with a message a customer understands."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

# Tab, newline and carriage return are ordinary typing; other C0/C1 controls are not.
_ALLOWED_CONTROLS = {"\t", "\n", "\r"}


@dataclass(frozen=True)
class GuardResult:
    text: str            # cleaned text to route (empty when refused)
    refusal: str = ""    # a customer-facing message when refused
    reason: str = ""     # operator-facing reason code


def check_input(text: str | None, max_chars: int) -> GuardResult:
    if text is None:
        return GuardResult("", "Please type a question, or attach a photo or a voice message.", "empty")
    if "\x00" in text or "\ufffd" in text:
        text = text.replace("\x00", "").replace("\ufffd", "")
    controls = sum(1 for ch in text if unicodedata.category(ch) == "Cc" and ch not in _ALLOWED_CONTROLS)
    cleaned = "".join(ch for ch in text if unicodedata.category(ch) != "Cc" or ch in _ALLOWED_CONTROLS)
    cleaned = unicodedata.normalize("NFC", " ".join(cleaned.split()))
    if not cleaned:
        return GuardResult("", "Please type a question, or attach a photo or a voice message.",
                           "empty" if not controls else "only control characters")
    if len(cleaned) > max_chars:
        return GuardResult("", f"Your message is {len(cleaned):,} characters long; please keep it under "
                               f"{max_chars:,} characters, or split it into several questions.", "too long")
    if controls > max(8, len(cleaned) // 4):
        return GuardResult("", "Your message contains unreadable characters. Please retype it as plain text.",
                           f"{controls} control characters")
    return GuardResult(cleaned)
