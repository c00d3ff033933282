"""Recurring LLM-bound questions (issue 42, part 2, first step): the messages the router sent to the LLM over a time
window, grouped by meaning in the shared embedding, largest group first.

A message is LLM-bound when the router chose the LLM for it: route ``llm`` (an LLM answer, or a rewrite of the KB
draft, accepted or not: ``served`` is ``llm``, ``rewrite`` or ``draft``), and route ``small`` rows that the load gate
``degraded`` or whose LLM call failed (``fallback``): their customers got the KB draft only because the engine was
busy or down, which is what an answer prepared while the engine is idle is for. Everything else (small tier, cache,
tool, guard, handoff) is left out.

Pure functions: the caller passes the database, the embed function (the knowledge base's, so each message is
embedded by the encoder the KB uses for its language: ``kb.embed_messages``, with ``kb.space_for`` to keep the
languages' spaces apart) and the threshold; nothing here loads a model or reads the process settings.

Grouping is greedy, oldest message first: a message joins the group it is closest to on average if that mean cosine
is at least the threshold of its vector space, else it starts a group. :data:`SIMILARITY` was chosen on the
hand-written development sets only (``python -m offline.recurring_threshold``; README, issue 42).

A group is ``personal`` when any member carries an order number, tracking number, email, phone (core/pii.py's
detectors on unmasked text, or the placeholders masking left, like ``[order]``) or introduces a name ("my name is
Ann"): part 2 never prepares an answer for it, so it is listed but flagged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import and_, or_, select

from chains.schema import LLM_ROUTE, PREPARE_CHANNEL, SMALL_ROUTE
from core.pii import MASKED, find_pii
from ops.logframes import masked
from storage.db import Database
from storage.tables import RequestLog, table_of

# Mean cosine at or above which a message joins a group, per KB vector space ("" = the primary encoder, MiniLM;
# "zh" = e5, whose cosines sit high for any two messages). Chosen by `python -m offline.recurring_threshold` on the
# hand-written development sets: the best mean F0.5 of the Bitext dev set and the demo shop's dev split (0.55), the
# best F0.5 of the Chinese train+valid splits (0.91).
SIMILARITY: dict[str, float] = {"": 0.55, "zh": 0.91}
ROW_LIMIT = 5_000      # the newest LLM-bound messages read per call
EXAMPLES = 3           # example texts per group besides the representative

Embed = Callable[[list[str]], Sequence[np.ndarray]]

# A name the customer gives: "my name is Ann", "this is Ann Lee", "I'm Ann", "name: Ann"; "我叫王芳", "我是王芳".
NAME_INTRO = re.compile(r"(?:\b(?:[Mm]y name is|[Mm]y name's|[Tt]his is|I am|I'm|[Nn]ame:)\s+[A-Z][a-z]+"
                        r"|我叫\S|我的名字是\S|我是[\u4e00-\u9fff]{2,3}(?:[，,。.！!]|$))")


@dataclass(frozen=True)
class LoggedQuestion:
    """One LLM-bound message of the log. ``kind``: llm (an LLM answer), rewrite (the KB draft sent for a rewrite),
    degraded (the load gate kept it from the LLM) or fallback (the LLM call failed)."""

    request_id: str
    created_at: datetime
    session_id: str
    text: str
    kind: str


@dataclass(frozen=True)
class RecurringGroup:
    representative: str             # the most central member: the highest mean cosine to the others
    count: int
    sessions: int                   # distinct sessions that asked it
    last_seen: datetime
    examples: tuple[str, ...]       # other members' distinct texts, newest first
    personal: bool                  # any member carries personal data: never prepared
    personal_kinds: tuple[str, ...]  # which: order, email, phone, tracking, number, name
    kinds: dict[str, int]           # members by kind (llm, rewrite, degraded, fallback)
    space: str                      # the KB vector space ("" = the primary encoder's)
    request_ids: tuple[str, ...]


def personal_kinds(text: str) -> list[str]:
    """The kinds of personal data in a logged message, masked or not (empty when none)."""
    kinds = set(find_pii(text)) | {m.group(0)[1:-1] for m in MASKED.finditer(text)}
    if NAME_INTRO.search(text):
        kinds.add("name")
    return sorted(kinds)


def _kind(row) -> str:
    if row.route == "llm":
        rewrite = row.served in ("rewrite", "draft") or any(
            isinstance(step, dict) and step.get("stage") == "rewrite" for step in row.trace or [])
        return "rewrite" if rewrite else "llm"
    return "degraded" if row.degraded else "fallback"


def llm_bound(db: Database, since: datetime | None = None, until: datetime | None = None,
              limit: int = ROW_LIMIT) -> list[LoggedQuestion]:
    """The newest ``limit`` LLM-bound messages logged in [since, until), oldest first; empty texts (purged by
    retention) left out."""
    t = table_of(RequestLog)
    query = (select(t.c.id, t.c.created_at, t.c.session_id, t.c.text, t.c.route, t.c.served, t.c.degraded,
                    t.c.trace)
             .where(or_(t.c.route == LLM_ROUTE, and_(t.c.route == SMALL_ROUTE, or_(t.c.degraded, t.c.fallback))))
             .where(t.c.text != "")
             .where(t.c.channel != PREPARE_CHANNEL)  # the idle-time worker's own requests are not customers'
             .order_by(t.c.created_at.desc(), t.c.id).limit(limit))
    if since is not None:
        query = query.where(t.c.created_at >= since)
    if until is not None:
        query = query.where(t.c.created_at < until)
    with db.engine.connect() as conn:
        rows = list(conn.execute(query))
    return [LoggedQuestion(r.id, r.created_at, r.session_id or "", r.text, _kind(r)) for r in reversed(rows)]


def _unit(vectors: Sequence[np.ndarray]) -> np.ndarray:
    matrix = np.asarray(np.stack([np.asarray(v, dtype=np.float32).ravel() for v in vectors]), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def cluster(vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """Greedy grouping of unit row vectors, in row order: each row joins the group whose members it is closest to on
    average (mean cosine) when that mean is at least ``threshold``, else starts one. Groups as lists of row indices.
    (The mean cosine, not the cosine to the normalised centroid: in e5's space every centroid of a few members is
    close to every message, and groups swallowed everything.)"""
    groups: list[list[int]] = []
    sums = np.zeros((0, vectors.shape[1]), dtype=np.float32)
    sizes = np.zeros(0, dtype=np.float32)
    for row, vector in enumerate(vectors):
        if groups:
            mean_sims = (sums @ vector) / sizes
            best = int(np.argmax(mean_sims))
            if mean_sims[best] >= threshold:
                groups[best].append(row)
                sums[best] += vector
                sizes[best] += 1
                continue
        groups.append([row])
        sums = np.vstack([sums, vector[None, :]])
        sizes = np.append(sizes, np.float32(1))
    return groups


def _central(vectors: np.ndarray) -> int:
    """The member with the highest mean cosine to the group's members (itself included: ties go to the earliest)."""
    return int(np.argmax((vectors @ vectors.T).mean(axis=1)))


def _group(members: list[LoggedQuestion], vectors: np.ndarray, space: str) -> RecurringGroup:
    centre = members[_central(vectors)]
    examples: list[str] = []
    for member in sorted(members, key=lambda m: m.created_at, reverse=True):
        if member.text != centre.text and member.text not in examples and len(examples) < EXAMPLES:
            examples.append(member.text)
    found = sorted({kind for m in members for kind in personal_kinds(m.text)})
    kinds: dict[str, int] = {}
    for member in members:
        kinds[member.kind] = kinds.get(member.kind, 0) + 1
    return RecurringGroup(
        representative=centre.text, count=len(members), sessions=len({m.session_id or m.request_id for m in members}),
        last_seen=max(m.created_at for m in members), examples=tuple(examples), personal=bool(found),
        personal_kinds=tuple(found), kinds=kinds, space=space, request_ids=tuple(m.request_id for m in members))


def threshold_for(space: str, threshold: float | Mapping[str, float]) -> float:
    """The similarity for one vector space: a number for all, or per space (unknown spaces: the primary's)."""
    if isinstance(threshold, Mapping):
        return float(threshold.get(space, threshold.get("", SIMILARITY[""])))
    return float(threshold)


def group_questions(questions: Sequence[LoggedQuestion], embed: Embed,
                    threshold: float | Mapping[str, float] = SIMILARITY,
                    space_of: Callable[[str], str] | None = None, min_count: int = 1) -> list[RecurringGroup]:
    """``questions`` (oldest first) grouped by meaning, per vector space, groups of at least ``min_count`` members,
    the largest first (then the most sessions, then the most recent)."""
    by_space: dict[str, list[LoggedQuestion]] = {}
    for question in questions:
        by_space.setdefault(space_of(question.text) if space_of else "", []).append(question)
    groups: list[RecurringGroup] = []
    for space, members in by_space.items():
        vectors = _unit(embed([m.text for m in members]))
        for rows in cluster(vectors, threshold_for(space, threshold)):
            if len(rows) >= min_count:
                groups.append(_group([members[r] for r in rows], vectors[rows], space))
    groups.sort(key=lambda g: (-g.count, -g.sessions, -g.last_seen.timestamp(), g.representative))
    return groups


def recurring_questions(db: Database, embed: Embed, since: datetime | None = None, until: datetime | None = None,
                        threshold: float | Mapping[str, float] = SIMILARITY, space_of: Callable[[str], str] | None = None,
                        min_count: int = 2, top: int | None = None, limit: int = ROW_LIMIT) -> list[RecurringGroup]:
    """The LLM-bound questions of [since, until) that recur (at least ``min_count`` messages), largest group first;
    the first ``top`` when given."""
    groups = group_questions(llm_bound(db, since, until, limit), embed, threshold, space_of, min_count)
    return groups[:top] if top is not None else groups


def table_rows(groups: Sequence[RecurringGroup], mask_pii: bool = True) -> list[dict[str, object]]:
    """The groups as the console and `tandem ops recurring` show them; customer text masked unless the deployment
    keeps personal data (TANDEM_MASK_PII=false, passed in by the caller)."""
    return [{"question": masked(g.representative, mask_pii), "count": g.count, "sessions": g.sessions,
             "last_seen": g.last_seen, "personal": g.personal, "personal_data": ", ".join(g.personal_kinds),
             "examples": " | ".join(masked(text, mask_pii) for text in g.examples),
             "sent_as": ", ".join(f"{kind} {n}" for kind, n in sorted(g.kinds.items()))} for g in groups]
