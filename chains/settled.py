"""What can be judged of an LLM answer while it is still being written: its finished sentences, and a defect in them
that no later text can take away (chains/verify.py judges the whole answer). Lets the LLM tier stop generating an
answer it will replace anyway, and replace it sooner."""

from __future__ import annotations

import re
from collections.abc import Sequence

from chains.verify import _ECHO, _NARRATION, _REFUSAL, Defect, _parroted, ungrounded_statement, without_citations

# Where a sentence has surely ended in text still being written: a full stop, "!" or "?" with a space after it ("3.5"
# and "northwind.example" are no ends), a Chinese one, or a line break.
_SETTLED_END = re.compile(r"[.!?](?=\s)|[。！？]|\n")


def settled_end(text: str) -> int:
    """Where the finished sentences of text still being written end (0: none has)."""
    ends = [m.end() for m in _SETTLED_END.finditer(text)]
    return ends[-1] if ends else 0


def settled_text(text: str) -> str:
    """The finished sentences of text still being written."""
    return text[:settled_end(text)].strip()


def settled_defect(text: str, *, message: str, context: Sequence[str]) -> Defect | None:
    """A defect in the finished sentences of ``text``, an answer still being written (give all of it: a sentence
    counts as finished once what follows its full stop has arrived), that no later text can take away, or
    None. Only the checks that hold for any continuation: a context label or the fence echoed, narration about the
    customer, a run of the customer's words parroted, a refusal, a sentence the help-center text does not ground
    (``context`` should already hold every stand-in the check may write, so a later one cannot ground it). The
    whole-answer checks (grounded share, restated question, unanswered cost, cut-off, language, off topic) wait for
    the end. Lets the chain stop generating an answer it will replace anyway, and replace it sooner."""
    settled = settled_text(text)
    if not settled:
        return None
    for kind, pattern in (("echo", _ECHO), ("narration", _NARRATION), ("refusal", _REFUSAL)):
        if match := pattern.search(settled):
            return Defect(kind, match.group(0).strip())
    if parroted := _parroted(settled, message):
        return Defect("echo", parroted)
    if context and (statement := ungrounded_statement(without_citations(settled), context)):
        return Defect("ungrounded", statement)
    return None


class SettledWatch:
    """Follows the text shown so far and checks its finished sentences each time one more has ended."""

    def __init__(self, message: str, context: Sequence[str]):
        self.message, self.context = message, context
        self.checked = 0  # where the finished sentences checked so far end
        self.defect: Defect | None = None

    def feed(self, shown: str) -> Defect | None:
        """The settled defect, once one is found (then nothing more is checked)."""
        if self.defect is None and (end := settled_end(shown)) > self.checked:
            self.checked, self.defect = end, settled_defect(shown, message=self.message, context=self.context)
        return self.defect
