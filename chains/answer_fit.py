"""Does an LLM answer fit the message it answers, beyond its text (chains/verify.py judges the text)? Two checks the
LLM tier runs with what the router and the encoder know: an answer about something else than the message
(:func:`off_topic`, by its similarity in the message's vector space), and a help-center answer copied whole where the
router found that none fits (:func:`copied_answer`)."""

from __future__ import annotations

from collections.abc import Sequence

from chains.verify import _TOKEN, Defect, _content_words, _stem, unanswered_slot, without_citations

# An LLM answer that is one help-center answer copied whole is that answer served as a draft. The router sent the
# message to the LLM because no help-center answer fits it, so a copy goes against that judgement with nothing new:
# "你们的毛巾是纯棉的吗？" (are your towels pure cotton?) got the wrong-item answer, word for word (make demo,
# 2026-12-06). A copy is COPIED_SHARE of the answer's tokens or more in runs of COPY_RUN that one answer has in the
# same order; an answer that adapts a help-center answer to the message changes more than that.
COPY_RUN, COPIED_SHARE, MIN_COPIED_TOKENS = 6, 0.8, 12


def copied_answer(answer: str, entries: Sequence[str]) -> str:
    """The start of the help-center answer in ``entries`` that ``answer`` copies whole, or ""."""
    said = _TOKEN.findall(without_citations(answer).lower())
    if len(said) < MIN_COPIED_TOKENS:
        return ""
    for entry in entries:
        have = _TOKEN.findall(entry.lower())
        runs = {tuple(have[i:i + COPY_RUN]) for i in range(len(have) - COPY_RUN + 1)}
        covered: set[int] = set()
        for i in range(len(said) - COPY_RUN + 1):
            if tuple(said[i:i + COPY_RUN]) in runs:
                covered.update(range(i, i + COPY_RUN))
        if len(covered) >= COPIED_SHARE * len(said):
            return entry[:80]
    return ""


# An answer is about the message: its similarity to the message, in the message's own vector space (the answer
# embedded as a passage), is at least the floor, or it shares a content word with it. Fitted on development
# messages and their right KB answers (scripts/relevance_floor.py): at these floors about 1 % of right answers
# would be flagged, and about half of answers to a different question (demo dev, English, MiniLM: 0.15; Chinese
# valid, multilingual-e5-small, whose similarities all sit high: 0.84). Per encoder name: an encoder not listed
# has no floor (the check is off for it) until the script is run for it.
RELEVANCE_FLOOR = {"minilm": 0.15, "e5": 0.84}


def off_topic(message: str, answer: str, similarity: float | None, encoder: str) -> Defect | None:
    """A defect when the answer is about something else than the message (the nearest help-center text of a
    message the help center does not cover, answered as if it did: "do you ever get tired?" got the student
    discount)."""
    floor = RELEVANCE_FLOOR.get(encoder, RELEVANCE_FLOOR.get(encoder.split("-")[0]))  # "minilm-tuned": MiniLM's
    if similarity is None or floor is None or similarity >= floor:
        return None
    if {_stem(w) for w in _content_words(message)} & {_stem(w) for w in _content_words(without_citations(answer))}:
        return None
    return Defect("off_topic", f"similarity {similarity:.2f} to the message, no word of it in common")


def misses_the_question(message: str, answer: str, similarity: float | None, encoder: str) -> Defect | None:
    """Whether ``answer`` does not answer ``message``: it is off topic (:func:`off_topic`), or the message names a
    price or a size that the answer says nothing to (chains.verify.unanswered_slot). Used for a rejected
    rewrite's draft: when neither answers the question, both are replaced (chains/tiers/llm.py)."""
    if slot := unanswered_slot(message, answer):
        return Defect("unanswered", slot)
    return off_topic(message, answer, similarity, encoder)
