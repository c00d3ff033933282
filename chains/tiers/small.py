"""The small tier: the knowledge base's draft with its citations, a notice when it was the fallback choice, and the
question back when help-center answers fit the message about equally well.

It also takes over a turn whose customer clicked a suggested reply (``ChatRequest.suggestion``: a predicted
follow-up, chains/followups.py, or one of the choices below): that KB answer is served at once, whatever the
threshold stage planned, and the trace notes the click (stage ``suggest``) for the console's click-through.

**Which one?** When the two best help-center answers score less than the margin of the message's language apart
(TANDEM_CLARIFY_MARGIN; TANDEM_CLARIFY_MARGIN_ZH for Chinese, whose e5 space spreads scores less), the customer is
not served the top one: they get the close answers' titles, numbered and as suggested replies, and pick one (a
click, or its number typed back). A wrong help-center answer served with confidence is the commonest answer that
does not answer the question (docs/answers.md, issue 57); on the demo shop's development messages the draft was
wrong for 12 of 107 served, and each of those 12 had its two best answers under 0.085 apart. Asked only once in a
row: a message after the question is answered with its best draft.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from chains import answers
from chains.schema import CLARIFY_SERVED, Revised
from chains.tiers.base import SMALL_ROUTE, Tier, TierParts, register
from chains.turn import Turn

# A third answer joins the two closest when it scores within this of the best (fitted on the demo shop's development
# messages: 0.05 put the right answer among the choices as often as 0.15 did, with 2.4 choices instead of 3).
CHOICE_BAND = 0.05
MAX_CHOICES = 3
# A choice named back: "2", "#2", "number 2", "the second one (please)", "2nd", "第二个", "2号".
_ORDINALS = {"first": "1", "1st": "1", "second": "2", "2nd": "2", "third": "3", "3rd": "3",
             "一": "1", "二": "2", "三": "3"}
_NUMBER = re.compile(r"^\s*(?:the\s+|no\.?\s*|number\s*|option\s*|#|第)?\s*([1-9]|first|1st|second|2nd|third|3rd|一|二|三)"
                     r"\s*(?:one|个|项|条|号|\.|\))?(?:\s*(?:please|pls|thanks|,|!|\.|。|！))*\s*$", re.IGNORECASE)
_NUMBERED_LINE = re.compile(r"^([1-9])\. (.+)$", re.MULTILINE)


def clarify_margin(parts: TierParts, language: str) -> float:
    """The margin under which a message in ``language`` is asked "which one?" (English's for any language unnamed)."""
    margins = parts.clarify_margins
    return margins.get(language, margins.get("en", 0.0))


@register
class SmallTier(Tier):
    name = SMALL_ROUTE
    cacheable = True
    plans = (SMALL_ROUTE,)

    def claims(self, turn: Turn) -> tuple[str, str] | None:
        """A clicked suggested reply (or a choice's number typed back, made a click at the guard): that KB answer,
        at once; an unknown id is routed as the typed message."""
        answer_id = turn.request.suggestion
        if not answer_id:
            return None
        hit = self.parts.kb.answer_hit(answer_id) if self.parts.kb is not None else None
        if hit is None:
            turn.note("suggest", "unknown suggestion ignored", choice=answer_id)
            return None
        turn.hits = [hit]
        turn.draft = answers.draft_answer(turn.text, turn.hits, self.parts.brand)
        turn.note("suggest", "clicked", choice=answer_id)
        return SMALL_ROUTE, f"suggested reply '{answer_id}' clicked: the small tier answers it"

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        choices = self.choices(turn)
        if choices:
            yield from self._ask_which(turn, choices)
            return
        draft = turn.draft or answers.draft_answer(turn.text, turn.hits, self.parts.brand)
        turn.sources = draft.sources
        text = draft.text
        if turn.no_fit:
            text = f"{answers.notices_for(self.parts.brand)[turn.language].no_fit}\n\n{text}"
        if turn.degraded:
            text = f"{text}\n\n{answers.notices_for(self.parts.brand)[turn.language].degraded}"
        turn.note("tier", SMALL_ROUTE, sources=[s["answer_id"] for s in draft.sources])
        turn.finish(SMALL_ROUTE, text, "tier: small (knowledge-base draft)")
        yield text
        yield turn

    # --- which one? ---------------------------------------------------------------------------------------
    def close_call(self, turn: Turn) -> bool:
        """The turn's best two help-center answers are closer than its language's margin (never, at margin 0)."""
        margin, asked_below = turn.scores.get("kb_margin"), clarify_margin(self.parts, turn.language)
        return asked_below > 0 and margin is not None and margin < asked_below

    def choices(self, turn: Turn) -> list[Any]:
        """The help-center answers to offer instead of the top one, best first; [] to serve the draft."""
        if (not self.close_call(turn) or turn.request.mode != "routed" or turn.request.suggestion or turn.degraded
                or turn.no_fit or self._last_question(turn)):
            return []
        distinct: dict[str, Any] = {}
        for hit in turn.hits:
            distinct.setdefault(hit.answer_id, hit)
        ranked = list(distinct.values())
        if len(ranked) < 2:
            return []
        top = ranked[0].score
        return ranked[:2] + [hit for hit in ranked[2:MAX_CHOICES] if top - hit.score <= CHOICE_BAND]

    def _ask_which(self, turn: Turn, choices: list[Any]) -> Iterator[str | Revised | Turn]:
        lines = [answers.notices_for(self.parts.brand)[turn.language].which_one, ""]
        lines += [f"{number}. {hit.title or hit.answer_id}" for number, hit in enumerate(choices, 1)]
        text = "\n".join(lines)
        turn.suggestions = [{"answer_id": hit.answer_id, "title": hit.title or hit.answer_id,
                             "score": round(hit.score, 3)} for hit in choices]
        turn.served, turn.sources = CLARIFY_SERVED, []
        turn.note("tier", "asked which", options=[hit.answer_id for hit in choices],
                  kb_margin=turn.scores.get("kb_margin"),
                  clarify_margin=clarify_margin(self.parts, turn.language))
        turn.finish(SMALL_ROUTE, text, f"tier: small asked which of {len(choices)} help-center answers is meant "
                                       f"(the best two {turn.scores.get('kb_margin', 0):.3f} apart)")
        yield text
        yield turn

    def _last_question(self, turn: Turn) -> str:
        """The bot's last message when it was the question "which one?", else ""."""
        said = next((t["content"] for t in reversed(turn.history) if t.get("role") == "assistant"), "")
        notices = answers.notices_for(self.parts.brand).values()
        return said if any(said.startswith(n.which_one) for n in notices) else ""

    def number_picked(self, turn: Turn) -> str:
        """The answer id of the choice whose number the customer typed back after the question, else ""."""
        number = _NUMBER.match(turn.text)
        question = self._last_question(turn) if number else ""
        if not question or self.parts.kb is None:
            return ""
        titles = dict(_NUMBERED_LINE.findall(question))
        title = titles.get(_ORDINALS.get(number.group(1).lower(), number.group(1))) if number else None
        return next((e["answer_id"] for e in self.parts.kb.entries() if title and e.get("title") == title), "")
