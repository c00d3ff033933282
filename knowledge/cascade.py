"""A second, stronger English encoder asked only when the first is unsure (`TANDEM_CASCADE_ENCODER=mpnet`).

The primary space (MiniLM, tuned on the KB) answers every message. When its top two answers are within
``margin`` of each other, the message is embedded again by the stronger encoder (all-mpnet-base-v2), searched in
that encoder's space over the same records (same hybrid search: dense kNN, BM25 and the answer head), and each
answer's score becomes ``weight · primary + (1 − weight) · refined``. A sure message pays nothing more, so the
median message costs what MiniLM costs; an unsure one pays one more forward pass and one more search.

What the router reads stays the primary space's distance evidence (its inputs mean what they meant when it was
fitted); only the ranking and the answers' scores (the top score and the margin) come from the fused scores.

Margin and weight were chosen on the development sets only (`scripts/cascade_fit.py`, README "A stronger
encoder"), never on held-out messages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.encoders import Encoder
from knowledge.index import AnswerScore, HybridIndex

# Answers scored in each space before fusing: an answer outside one space's pool reads that space's lowest score.
POOL = 10
MAX_WORDS = 32


@dataclass(frozen=True)
class CascadeParams:
    """When to ask the stronger encoder, and how much its scores count."""

    # Ask when the primary space's top-two answer-score gap is under this. Chosen with the weight and the floor on
    # the pooled development messages (Bitext dev against the Bitext FAQ with MiniLM and mpnet tuned on it, as
    # `tandem kb tune` tunes both when the cascade is on; the demo shop's dev split against the demo KB as shipped),
    # escalating at most 30 % of them, with mpnet as served (8-bit weights) and the word cap below
    # (scripts/cascade_fit.py --max-escalation 0.3, 2026-12-06: pooled dev top-1 0.859 -> 0.924, 25 % escalated;
    # with the base mpnet on Bitext it chose 0.0582 and 0.5, for 0.905).
    margin: float = 0.0674
    weight: float = 0.2  # the primary space's share of the fused score
    # Only a plausible top answer is worth a second look: a message whose best answer scores under this is out of
    # the KB's scope whatever the order of its answers, and the router reads it so without the stronger encoder.
    floor: float = 0.2
    # Only a message of at most this many words is worth a second pass (0: any length). mpnet's time grows with the
    # message: a long τ-bench-style instruction took about 200 ms on one thread and set the routing p95 alone, and such
    # messages are complex requests that the router sends to the LLM whatever their top answer. 32 covers 99.6 % of
    # the in-scope development messages (p95 19-21 words, longest 34) and leaves out 97 % of τ-bench's requests
    # (median 69 words); chosen on development messages and cost only (README "A stronger encoder").
    max_words: int = MAX_WORDS


@dataclass
class Cascade:
    """The stronger encoder and its space; :meth:`refine` re-scores an unsure search."""

    encoder: Encoder
    index: HybridIndex
    params: CascadeParams

    def unsure(self, query: str, scored: list[AnswerScore]) -> bool:
        """Worth the stronger encoder: a short enough message whose plausible top two answers are close."""
        return (len(scored) >= 2 and scored[0].score >= self.params.floor
                and scored[0].score - scored[1].score < self.params.margin
                and within_words(query, self.params.max_words))

    def refine(self, query: str, scored: list[AnswerScore], k: int) -> list[AnswerScore]:
        """``scored`` (the primary space's best answers, at least two, best first) fused with the stronger space's
        scores of the same message; best ``k``."""
        refined = self.index.search(query, self.encoder.encode_query(query), k=max(k, POOL))
        return fuse(scored, refined, self.params.weight)[:k]


def within_words(query: str, max_words: int) -> bool:
    return max_words <= 0 or len(query.split()) <= max_words


def fuse(primary: list[AnswerScore], refined: list[AnswerScore], weight: float) -> list[AnswerScore]:
    """Each answer of either list scored ``weight · primary + (1 − weight) · refined``, best first; an answer missing
    from one list reads that list's lowest score. Record, dense and lexical parts stay the primary's (what the trace
    shows), or the refined space's for an answer only it found (both index the same records)."""
    if not refined:
        return list(primary)
    mine = {s.answer_id: s for s in primary}
    other = {s.answer_id: s for s in refined}
    primary_floor = primary[-1].score if primary else 0.0
    fused = []
    for answer_id in dict.fromkeys([*mine, *other]):
        base = mine.get(answer_id) or other[answer_id]
        score = (weight * (mine[answer_id].score if answer_id in mine else primary_floor)
                 + (1.0 - weight) * (other[answer_id].score if answer_id in other else refined[-1].score))
        fused.append(AnswerScore(answer_id, float(np.clip(score, 0.0, 1.0)), base.record, base.dense, base.lexical))
    fused.sort(key=lambda s: -s.score)
    return fused
