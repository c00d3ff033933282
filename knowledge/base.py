"""The knowledge-base contract: what the router chain, the console and the CLI may ask of any knowledge base.

A knowledge base holds FAQ answers with example questions, answers a search with one :class:`Hit` per answer
(best first, scores in [0, 1] that compare across queries), names its content with a ``version`` that changes
on every edit (cached answers are keyed by it), and takes new sources through ``ingest``. Today's
implementation keeps its records in Chroma (:mod:`knowledge.chroma_kb`); another store plugs in here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from core.encoders import Encoder


class Hit(BaseModel):
    answer_id: str
    answer: str
    title: str
    score: float  # in [0, 1]; see knowledge.index for the formula (dense cosine blended with BM25)
    matched_text: str  # the paraphrase, title or answer text that matched best
    source: str
    category: str = ""
    lang: str = ""
    dense: float = 0.0  # the best record's cosine similarity alone (distance evidence for the router)


class KnowledgeBase(ABC):
    """Search, version, ingest; plus the read-outs the console shows."""

    encoder: Encoder

    @property
    @abstractmethod
    def version(self) -> str:
        """Content hash; changes on every change of any record."""

    @abstractmethod
    def search(self, query: str, k: int = 3, vector: np.ndarray | None = None,
               evidence: dict[str, float] | None = None) -> list[Hit]:
        """Best ``k`` answers, one Hit per answer. ``vector`` is the embedding of ``search_text(query)`` by
        ``encoder_for(query)`` when the caller already has it (cache, router and retrieval share one embedding
        per message). ``evidence``, when given, is filled with how close the message comes to the KB (distance
        evidence for the router: ``dense_top``, ``dense_z``, ``dense_mean``, ``dense_margin``, ``agreement``,
        ``lexical_top``, ``has_oos``, ``oos_gap``, ``oos_knn`` for its out-of-scope examples and ``has_starter``,
        ``starter_gap``, ``starter_knn`` for Tandem's starter examples)."""

    @abstractmethod
    def ingest(self, paths: Iterable[Path | str], progress: bool = True) -> Any:
        """Parse answer/question CSVs, Markdown and text files and upsert their good rows; report bad ones."""

    @abstractmethod
    def upsert_answers(self, rows: Iterable[Any], progress: bool = False) -> int:
        """Insert or replace answers (``knowledge.ingest.AnswerRow``) by answer_id; returns records changed."""

    @abstractmethod
    def upsert_questions(self, rows: Iterable[Any], progress: bool = False) -> int:
        """Add example questions (``knowledge.ingest.QuestionRow``), each pointing at an existing answer."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of answers."""

    @abstractmethod
    def entries(self, search: str | None = None) -> list[dict]:
        """Answers with their example-question counts (the console's KB page), filtered by a substring."""

    @abstractmethod
    def stats(self) -> dict:
        """Counts of answers, questions and records, per category and per source."""

    def search_text(self, message: str) -> str:
        """The text :meth:`search` embeds and matches for ``message``; a caller that passes ``vector`` must
        have embedded this text (by :meth:`encoder_for`). The message itself unless the KB rewrites it."""
        return message.strip()

    def embed_messages(self, messages: list[str], batch_size: int = 64) -> list[np.ndarray]:
        """The vectors :meth:`search` expects for many messages at once: each message's search text embedded by
        its language's encoder (spaces may differ in width), in batches per encoder; in the order given."""
        rows_by_encoder: dict[int, list[int]] = {}
        for row, message in enumerate(messages):
            rows_by_encoder.setdefault(id(self.encoder_for(message)), []).append(row)
        vectors: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(messages)
        for rows in rows_by_encoder.values():
            encoder = self.encoder_for(messages[rows[0]])
            embedded = encoder.encode_queries([self.search_text(messages[r]) for r in rows], batch_size=batch_size)
            for row, vector in zip(rows, embedded):
                vectors[row] = vector
        return vectors

    def answer_texts(self) -> dict[str, str]:
        return {}

    def answer_hit(self, answer_id: str) -> Hit | None:
        """One answer by id, as a search hit that matched its title fully (a customer chose it by name), or None."""
        row = next((e for e in self.entries() if e["answer_id"] == answer_id), None)
        if row is None:
            return None
        return Hit(answer_id=answer_id, answer=row["answer"], title=row.get("title", ""), score=1.0,
                   matched_text=row.get("title") or answer_id, source=row.get("source", ""),
                   category=row.get("category", ""))

    def left_out_searches(self, per_space: int = 300, seed: int = 13) -> list[tuple[str, str, list[Hit],
                                                                                     dict[str, float]]]:
        """Stored example questions searched as new messages, each without its own record: (question, its
        answer_id, hits, evidence). Empty for a KB that cannot leave a record out."""
        return []

    def space_for(self, text: str) -> str:
        """Which vector space searches this message ("" = the primary encoder's); cached vectors are per space."""
        return ""

    def encoder_for(self, text: str) -> Encoder:
        """The encoder whose embedding of this message :meth:`search` expects."""
        return self.encoder

