"""A knowledge base in a temporary folder, filled from CSV files, for evaluation and routing experiments."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from core.encoders import Encoder
from knowledge.chroma_kb import ChromaKnowledgeBase
from knowledge.index import FusionParams
from knowledge.ingest import OUT_OF_SCOPE, AnswerRow, parse_file, validate


def throwaway_kb(encoder: Encoder, answers_csv: Path, questions_csv: Path | None = None, *,
                 id_column: str = "answer_id", where: dict[str, str] | None = None, progress: bool = False,
                 params: FusionParams | None = None) -> ChromaKnowledgeBase:
    """A KB in a temporary folder (deleted at exit) for evaluation and routing experiments.

    ``answers_csv`` is an answers CSV (``answer_id,answer`` plus any extra columns), or a questions CSV
    (``query`` + ``id_column``) for intent datasets without answer texts: each label then becomes a
    stub answer that is not searchable itself and the questions carry the retrieval; rows labelled
    ``out_of_scope`` are the KB's out-of-scope examples. ``where`` keeps only rows whose columns equal the
    given values (e.g. ``{"in_scope": "True"}``). Bad rows are skipped.
    """
    folder = Path(tempfile.mkdtemp(prefix="tandem-kb-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    kb = ChromaKnowledgeBase(encoder, path=folder, collection="throwaway_kb", params=params)
    files = [parse_file(Path(answers_csv), id_column=id_column, where=where)]
    if questions_csv is not None:
        files.append(parse_file(Path(questions_csv), id_column=id_column, where=where))
    stubs = []
    if files[0].kind == "questions":
        labels = dict.fromkeys(q.answer_id for q in files[0].questions if q.answer_id != OUT_OF_SCOPE)
        stubs = [AnswerRow(answer_id=label, answer=label, title=label, source=Path(answers_csv).name,
                           searchable=False) for label in labels]
    answers, questions, _bad = validate(files, {s.answer_id: s.answer for s in stubs})
    kb.write(stubs + answers, questions, progress=progress)
    return kb
