"""Input guard: the first stage. Refuses what no later stage should see, with a message a customer understands."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from chains.schema import RefusalCode

# Tab, newline and carriage return are ordinary typing; other C0/C1 controls are not.
_ALLOWED_CONTROLS = {"\t", "\n", "\r"}
# Full-width Latin letters and digits (typed with a Chinese input method: "ｏｒｄｅｒ １２３") become ASCII, and the
# ideographic space a space; Chinese punctuation (，。？) stays as the customer typed it.
_FULL_WIDTH = {code: code - 0xFEE0 for code in (*range(0xFF10, 0xFF1A), *range(0xFF21, 0xFF3B), *range(0xFF41, 0xFF5B))}
_FULL_WIDTH[0x3000] = 0x20
NO_WORDS = ("I can only answer questions written in words: what can I help you with? "
            "(For example: where is my order?) 请用文字告诉我您需要什么帮助，例如：我的订单到哪了？")


@dataclass(frozen=True)
class GuardResult:
    text: str            # cleaned text to route (empty when refused)
    refusal: str = ""    # a customer-facing message when refused
    reason: str = ""     # operator-facing reason
    code: RefusalCode = ""  # the refusal's machine-readable code (chains.schema.RefusalCode)


def check_input(text: str | None, max_chars: int) -> GuardResult:
    if text is None:
        return GuardResult("", "Please type a question, or attach a photo or a voice message.", "empty", "empty")
    if "\x00" in text or "\ufffd" in text:
        text = text.replace("\x00", "").replace("\ufffd", "")
    controls = sum(1 for ch in text if unicodedata.category(ch) == "Cc" and ch not in _ALLOWED_CONTROLS)
    cleaned = "".join(ch for ch in text if unicodedata.category(ch) != "Cc" or ch in _ALLOWED_CONTROLS)
    cleaned = unicodedata.normalize("NFC", " ".join(cleaned.translate(_FULL_WIDTH).split()))
    if not cleaned:
        return GuardResult("", "Please type a question, or attach a photo or a voice message.",
                           *(("empty", "empty") if not controls else ("only control characters", "control_only")))
    if len(cleaned) > max_chars:
        return GuardResult("", f"Your message is {len(cleaned):,} characters long; please keep it under "
                               f"{max_chars:,} characters, or split it into several questions.", "too long", "too_long")
    if controls > max(8, len(cleaned) // 4):
        return GuardResult("", "Your message contains unreadable characters. Please retype it as plain text.",
                           f"{controls} control characters", "too_many_controls")
    if not any(unicodedata.category(ch)[0] in "LN" for ch in cleaned):
        # only emoji, punctuation or symbols: nothing to search or to send to the LLM; ask in both languages
        return GuardResult("", NO_WORDS, "no words", "no_words")
    return GuardResult(cleaned)


# Knowledge-base text is shown to customers (small tier) and put in the LLM prompt. A planted sentence
# that addresses the assistant ("ignore previous instructions ...") is an injection, never an answer.
_PLANTED_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget)\b[^.!?\n]{0,40}\b(?:instructions?|rules|prompts?|guidelines)\b"
    r"|\b(?:reveal|print|show|repeat|output|leak)\b[^.!?\n]{0,30}\bsystem\s*prompt\b"
    r"|\bsystem\s+(?:notice|override|message|prompt)\s*:"
    r"|\byou\s+are\s+now\b|\bfrom\s+now\s+on\b[^.!?\n]{0,30}\b(?:reply|answer|respond|say)\b"
    r"|<\|im_(?:start|end)\|>",
    re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def strip_planted_instructions(text: str) -> str:
    """The text without sentences that give the assistant orders; unchanged when there are none."""
    if not _PLANTED_INSTRUCTION.search(text):
        return text
    lines = []
    for line in text.split("\n"):
        kept = [s for s in _SENTENCE_END.split(line) if not _PLANTED_INSTRUCTION.search(s)]
        lines.append(" ".join(kept))
    return "\n".join(lines).strip()
