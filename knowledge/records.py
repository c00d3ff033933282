"""The Chroma records a knowledge base keeps and how a write changes them: one record per answer, its title and each
example question, under ids derived from the answer; the records a write supersedes; a set of records' version."""

from __future__ import annotations

import hashlib
import json

from knowledge.ingest import OUT_OF_SCOPE, AnswerRow, QuestionRow

Records = dict[str, tuple[str, dict]]  # record id -> (document, metadata)


def record_id(kind: str, answer_id: str, text: str = "") -> str:
    if kind == "question":
        return f"question:{answer_id}:{hashlib.sha1(text.strip().lower().encode()).hexdigest()[:16]}"
    return f"{kind}:{answer_id}"


def content_version(records: Records) -> str:
    digest = hashlib.sha256()
    for rid in sorted(records):
        doc, meta = records[rid]
        digest.update(json.dumps([rid, doc, meta], sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:8]


def wanted_records(answers: list[AnswerRow], questions: list[QuestionRow]) -> Records:
    """The records these rows are stored as."""
    wanted: Records = {}
    for a in answers:
        base = {"answer_id": a.answer_id, "source": a.source}
        meta = {**base, "kind": "answer", "title": a.title, "category": a.category, "tags": a.tags,
                "origin": a.origin, "searchable": a.searchable, "lang": a.lang, "translation_of": a.translation_of}
        wanted[record_id("answer", a.answer_id)] = (a.answer, meta)
        if a.title and a.searchable:
            wanted[record_id("title", a.answer_id)] = (a.title, {**base, "kind": "title"})
    for q in questions:
        kind = "out_of_scope" if q.answer_id == OUT_OF_SCOPE else "question"
        wanted[record_id("question", q.answer_id, q.query)] = (
            q.query, {"answer_id": q.answer_id, "source": q.source, "kind": kind})
    return wanted


def superseded(current: Records, wanted: Records, answers: list[AnswerRow],
               replace_sources: frozenset[str] | set[str]) -> set[str]:
    """Ids of ``current`` records that writing ``wanted`` makes stale."""
    stale = set()
    new_answer_ids = {a.answer_id for a in answers}
    for rid, (_, meta) in current.items():
        if meta.get("kind") == "title" and meta["answer_id"] in new_answer_ids and rid not in wanted:
            stale.add(rid)  # the answer lost its title
        if (meta.get("kind") == "answer" and meta.get("origin") in ("markdown", "text")
                and meta.get("source") in replace_sources and meta["answer_id"] not in new_answer_ids):
            # A re-ingested Markdown/text file owns its entries: sections or chunks it no longer
            # has are gone, together with their titles and paraphrases.
            stale.update(r for r, (_, m) in current.items() if m.get("answer_id") == meta["answer_id"])
    return stale
