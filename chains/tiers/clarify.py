"""The clarify tier: when the KB's top answers are close and all plausible, ask the customer which one they mean.

A two-stage fallback, as intent-based assistants do it, and no LLM call. After the threshold stage planned a small
or rewrite answer, :meth:`ClarifyTier.claims` takes the turn when the top two or three KB answers (distinct answer
ids) all score at least ``floor`` and within ``margin`` of the top one (:class:`ClarifyRule`, fitted on development
messages only: scripts/clarify_fit.py, README "Clarifying questions"). The turn's route is ``clarify``: its answer
lists the answers' titles, plus "Something else"; ``turn.options`` carries them for the front ends (buttons in the
chat UI, ``options`` in the HTTP API and in /v1's ``tandem`` block).

A reply that carries the chosen answer id (``ChatRequest.choice``; in /v1 also a message that is exactly one of the
offered titles) is answered from that KB answer at once, on the small tier with its citation; the service stores
the choice as feedback on the clarify request (chains/service.py). ``choice="other"`` ("Something else") sends the
message on to the LLM tier (the small tier when there is none; the customer can also press "Talk to a human").

A suggested reply the customer clicked (``ChatRequest.suggestion``: a predicted follow-up, chains/followups.py) is
answered the same way, from its KB answer at once; the trace notes it as a click (stage ``suggest``), not as
feedback on a clarification.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from chains import answers
from chains.schema import Revised
from chains.tiers.base import CLARIFY_ROUTE, Tier, register
from chains.turn import Turn
from knowledge.ingest import OUT_OF_SCOPE

OTHER = "other"  # the choice "Something else"


@dataclass(frozen=True)
class ClarifyRule:
    """Ask when at least two distinct answers among the top ``most`` score >= ``floor`` and within ``margin`` of
    the top one. Fitted on the Bitext dev set and the demo shop's dev split (README, "Clarifying questions")."""

    floor: float
    margin: float
    most: int = 3


# Per vector space, fitted alike (scripts/clarify_fit.py): the most wrong top answers whose right answer is offered,
# asking at most 10 % of in-scope development messages and offering the right answer in at least 70 % of questions.
# English: the Bitext dev set and the demo shop's dev split; Chinese (the e5 space, whose scores sit far closer
# together: the English margin would ask 66 % of messages): its train and valid splits.
RULES = {"": ClarifyRule(floor=0.4, margin=0.06), "zh": ClarifyRule(floor=0.5, margin=0.004)}
WORDS = {
    "en": ("Which of these do you mean?", "Something else", "Choose one, or \"Something else\" and I will pass your "
           "question on."),
    "zh": ("您想问的是下面哪一项？", "其他问题", "请选择一项；如果都不是，请选“其他问题”，我会把您的问题转给同事或助手。"),
}


def offered(turn: Turn, rule: ClarifyRule | None = None) -> list[dict[str, Any]]:
    """The KB answers to offer for this turn (2 to ``rule.most``, best first), or [] when the rule does not ask.
    Only a routed turn the threshold stage planned for the small tier or a rewrite, decided by no operator rule.
    ``rule``: default, the rule of the turn's vector space."""
    rule = rule or RULES.get(turn.space, RULES[""])
    if (turn.done or turn.plan not in ("small", "rewrite") or turn.request.mode != "routed"
            or turn.request.names_answer
            or any(reason.startswith("rule:") for reason in turn.reasons)):
        return []
    hits = [h for h in distinct(turn.hits) if h.answer_id != OUT_OF_SCOPE][: rule.most]
    if len(hits) < 2:
        return []
    top = float(hits[0].score)
    close = [h for h in hits if float(h.score) >= rule.floor and top - float(h.score) <= rule.margin]
    if len(close) < 2:
        return []
    return [{"answer_id": h.answer_id, "title": h.title or h.answer_id, "score": round(float(h.score), 4)}
            for h in close]


def distinct(hits: Sequence[Any]) -> list[Any]:
    """One hit per answer id, best first (a KB gives one already; a test's list may not)."""
    out: dict[str, Any] = {}
    for hit in hits:
        out.setdefault(hit.answer_id, hit)
    return list(out.values())


def question(options: list[dict[str, Any]], language: str) -> str:
    ask, other, hint = WORDS.get(language, WORDS["en"])
    lines = [f"{i}. {o['title']}" for i, o in enumerate(options, 1)]
    return "\n".join([ask, "", *lines, f"{len(options) + 1}. {other}", "", hint])


def with_other(options: list[dict[str, Any]], language: str) -> list[dict[str, Any]]:
    """The options as front ends show them: the KB answers, then "Something else"."""
    return [*options, {"answer_id": OTHER, "title": WORDS.get(language, WORDS["en"])[1], "score": 0.0}]


def choice_in_history(turn: Turn) -> str:
    """The title the customer typed when it is exactly one of the options the last assistant turn offered (an
    OpenAI client answers a clarification with the option's words); "" otherwise."""
    last = next((t["content"] for t in reversed(turn.history) if t["role"] == "assistant"), "")
    if not any(last.startswith(words[0]) for words in WORDS.values()):
        return ""
    said = " ".join(turn.text.split()).casefold()
    titles = [line.split(". ", 1)[1] for line in last.splitlines() if ". " in line and line.split(". ", 1)[0].isdigit()]
    return next((t for t in titles if " ".join(t.split()).casefold() == said), "")


@register
class ClarifyTier(Tier):
    name = CLARIFY_ROUTE
    plans = ("clarify",)

    def claims(self, turn: Turn) -> tuple[str, str] | None:
        if turn.request.suggestion and not turn.request.choice:
            return self._suggested(turn, turn.request.suggestion)
        chosen = turn.request.choice or self._typed_choice(turn)
        if chosen:
            return self._chosen(turn, chosen)
        if not self.parts.clarify:
            return None
        options = offered(turn)
        if not options:
            return None
        turn.options = with_other(options, turn.language)
        rule = RULES.get(turn.space, RULES[""])
        return "clarify", (f"clarify: {len(options)} close answers (top {options[0]['score']:.3f}, runner-up "
                           f"{options[1]['score']:.3f}; floor {rule.floor}, margin {rule.margin})")

    def _typed_choice(self, turn: Turn) -> str:
        title = choice_in_history(turn)
        if not title or self.parts.kb is None:
            return ""
        if title.casefold() in {w[1].casefold() for w in WORDS.values()}:
            return OTHER
        return next((e["answer_id"] for e in self.parts.kb.entries() if e["title"] == title), "")

    def _chosen(self, turn: Turn, chosen: str) -> tuple[str, str] | None:
        if chosen == OTHER:
            turn.note("clarify", "chose something else", choice=OTHER)
            return "llm", "clarify: the customer chose \"something else\": the LLM tier answers"
        if not self._answer_from_kb(turn, chosen):
            turn.note("clarify", "unknown choice ignored", choice=chosen)
            return None
        turn.note("clarify", "chose an offered answer", choice=chosen)
        return "small", f"clarify: the customer chose '{chosen}': the small tier answers it"

    def _suggested(self, turn: Turn, answer_id: str) -> tuple[str, str] | None:
        """A clicked suggested reply: its KB answer, at once; an unknown id is routed as the typed message."""
        if not self._answer_from_kb(turn, answer_id):
            turn.note("suggest", "unknown suggestion ignored", choice=answer_id)
            return None
        turn.note("suggest", "clicked", choice=answer_id)
        return "small", f"suggested reply '{answer_id}' clicked: the small tier answers it"

    def _answer_from_kb(self, turn: Turn, answer_id: str) -> bool:
        hit = self.parts.kb.answer_hit(answer_id) if self.parts.kb is not None else None
        if hit is None:
            return False
        turn.hits = [hit]
        turn.draft = answers.draft_answer(turn.text, turn.hits, self.parts.brand)
        return True

    def answer(self, turn: Turn) -> Iterator[str | Revised | Turn]:
        text = question([o for o in turn.options if o["answer_id"] != OTHER], turn.language)
        turn.note("tier", "clarify", options=[o["answer_id"] for o in turn.options])
        turn.finish("clarify", text, "tier: clarify (asked which answer the customer means)")
        yield text
        yield turn
