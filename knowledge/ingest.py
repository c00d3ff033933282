"""Parse knowledge sources (answer CSVs, question CSVs, Markdown FAQs, plain text) into rows.

Parsing is separate from writing: every file becomes good :class:`AnswerRow` / :class:`QuestionRow`
items plus :class:`BadRow` complaints that name the file and row, and the knowledge base's ``ingest``
writes the good rows in one batch. A bad row never stops the good ones.

Row numbers are line numbers as an editor or spreadsheet shows them: the CSV header is row 1.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from core.errors import TandemError
from core.text import language_of

# A question row with this answer_id is an out-of-scope example: a message the FAQ does not answer (advice, other
# products, judgement calls). The router reads how much closer a message comes to these than to any answer.
OUT_OF_SCOPE = "out_of_scope"
CHUNK_CHARS = 500
CHUNK_OVERLAP = 100
TEXT_SUFFIXES = {".txt", ".text"}
MARKDOWN_SUFFIXES = {".md", ".markdown"}
SOURCE_SUFFIXES = {".csv", *TEXT_SUFFIXES, *MARKDOWN_SUFFIXES}


class AnswerRow(BaseModel):
    answer_id: str
    answer: str
    title: str = ""
    category: str = ""
    tags: str = ""
    source: str = ""
    origin: str = "csv"  # csv | markdown | text: files of the last two kinds own all their entries
    searchable: bool = True  # False for label-only stubs (an eval KB built from questions alone)
    lang: str = ""  # "en", "zh", ...; detected from the text when the file does not say
    translation_of: str = ""  # answer_id of the same answer in another language (the small tier picks by language)
    row: int = 0  # where it came from, for error messages; not stored

    def model_post_init(self, _context: object) -> None:
        if not self.lang:
            self.lang = language_of(f"{self.title} {self.answer}")


class QuestionRow(BaseModel):
    query: str
    answer_id: str
    source: str = ""
    row: int = 0


class BadRow(BaseModel):
    file: str
    row: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file} row {self.row}: {self.reason}"


class IngestReport(BaseModel):
    answers: int = 0
    questions: int = 0
    bad: list[BadRow] = []
    changed: int = 0  # records written or deleted; 0 means the KB was already up to date
    version: str = ""

    def summary(self) -> str:
        bad = f"{len(self.bad)} bad row{'s' if len(self.bad) != 1 else ''} (see above)" if self.bad else "no bad rows"
        same = " (unchanged)" if not self.changed else ""
        return (f"ingested {self.answers} answers, {self.questions} questions; {bad}; "
                f"version {self.version}{same}")


class ParsedFile(BaseModel):
    path: str
    kind: str  # answers | questions | markdown | text
    answers: list[AnswerRow] = []
    questions: list[QuestionRow] = []
    bad: list[BadRow] = []


def slug(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"[^\w]+", "-", text, flags=re.UNICODE).strip("-")[:60] or "entry"


def _read_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header (lower-cased) and (row number, row) pairs; a multi-line quoted cell keeps its first line."""
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise TandemError(f"cannot read {path} ({exc.strerror})") from None
    with handle:
        try:
            reader = csv.reader(handle)
            header = [h.strip().lower() for h in next(reader, [])]
            rows = []
            start = reader.line_num + 1
            for cells in reader:
                if any(c.strip() for c in cells):
                    rows.append((start, {h: (cells[i].strip() if i < len(cells) else "")
                                         for i, h in enumerate(header)}))
                start = reader.line_num + 1
        except (UnicodeDecodeError, csv.Error) as exc:
            raise TandemError(f"{path.name} is not a UTF-8 CSV file ({exc.__class__.__name__}: {exc})") from None
    return header, rows


def csv_kind(header: list[str], id_column: str = "answer_id") -> str | None:
    if id_column in header and "answer" in header:
        return "answers"
    if id_column in header and ("query" in header or "question" in header):
        return "questions"
    return None


def _matches(row: dict[str, str], where: dict[str, str] | None) -> bool:
    return not where or all(row.get(k, "").lower() == v.lower() for k, v in where.items())


def parse_answers_csv(path: Path, rows: list[tuple[int, dict[str, str]]], id_column: str = "answer_id",
                      where: dict[str, str] | None = None) -> ParsedFile:
    parsed = ParsedFile(path=str(path), kind="answers")
    for number, row in rows:
        if not _matches(row, where):
            continue
        answer_id, answer = row.get(id_column, ""), row.get("answer", "")
        if not answer_id:
            parsed.bad.append(BadRow(file=path.name, row=number, reason=f"missing {id_column}"))
        elif not answer:
            parsed.bad.append(BadRow(file=path.name, row=number, reason=f"empty answer for {id_column} '{answer_id}'"))
        else:
            parsed.answers.append(AnswerRow(answer_id=answer_id, answer=answer, title=row.get("title", ""),
                                            category=row.get("category", ""), tags=row.get("tags", ""),
                                            lang=row.get("lang", ""), translation_of=row.get("translation_of", ""),
                                            source=path.name, row=number))
    return parsed


def parse_questions_csv(path: Path, rows: list[tuple[int, dict[str, str]]], id_column: str = "answer_id",
                        where: dict[str, str] | None = None) -> ParsedFile:
    parsed = ParsedFile(path=str(path), kind="questions")
    for number, row in rows:
        if not _matches(row, where):
            continue
        query, answer_id = row.get("query") or row.get("question", ""), row.get(id_column, "")
        if not query:
            parsed.bad.append(BadRow(file=path.name, row=number, reason="empty query"))
        elif not answer_id:
            parsed.bad.append(BadRow(file=path.name, row=number, reason=f"missing {id_column} for '{query[:40]}'"))
        else:
            parsed.questions.append(QuestionRow(query=query, answer_id=answer_id, source=path.name, row=number))
    return parsed


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def parse_markdown(path: Path, text: str) -> ParsedFile:
    """Each heading is a question/title and the text under it its answer; the parent heading is the category."""
    parsed = ParsedFile(path=str(path), kind="markdown")
    sections: list[tuple[int, int, str, list[str]]] = []  # (line, level, heading, body lines)
    preamble: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _HEADING.match(line)
        if match:
            sections.append((number, len(match.group(1)), match.group(2).strip(), []))
        elif sections:
            sections[-1][3].append(line)
        else:
            preamble.append(line)
    stem = slug(path.stem)
    used: set[str] = set()
    parents: list[tuple[int, str]] = []
    if "\n".join(preamble).strip():
        sections.insert(0, (1, 7, path.stem, preamble))
    for i, (number, level, heading, body) in enumerate(sections):
        while parents and parents[-1][0] >= level:
            parents.pop()
        answer = "\n".join(body).strip()
        has_children = i + 1 < len(sections) and sections[i + 1][1] > level
        category = parents[-1][1] if parents else ""
        parents.append((level, heading))
        if not answer:
            if not has_children:  # a section heading with sub-questions is structure, not a bad row
                parsed.bad.append(BadRow(file=path.name, row=number, reason=f"heading '{heading}' has no answer text"))
            continue
        answer_id = f"{stem}-{slug(heading)}"
        n = 2
        while answer_id in used:
            answer_id, n = f"{stem}-{slug(heading)}-{n}", n + 1
        used.add(answer_id)
        parsed.answers.append(AnswerRow(answer_id=answer_id, answer=answer, title=heading, category=category,
                                        source=path.name, origin="markdown", row=number))
    return parsed


def chunk_text(text: str, size: int = CHUNK_CHARS, overlap: int = CHUNK_OVERLAP) -> list[str]:
    """~``size``-char windows that end at a sentence (else a word) boundary and overlap by ~``overlap``."""
    text = re.sub(r"[ \t]+", " ", text).strip()
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            window = text[start:end]
            cut = max(window.rfind(". "), window.rfind("\n"), window.rfind("? "), window.rfind("! "))
            if cut < size * 0.5:
                cut = window.rfind(" ")
            if cut > size * 0.3:
                end = start + cut + 1
        chunk = text[start:end].strip()
        if chunk:
            chunks.append(chunk)
        if end >= len(text):
            break
        nxt = max(end - overlap, start + 1)
        space = text.find(" ", nxt)
        start = space + 1 if 0 <= space < end else nxt
    return chunks


def parse_text(path: Path, text: str) -> ParsedFile:
    parsed = ParsedFile(path=str(path), kind="text")
    chunks = chunk_text(text)
    if not chunks:
        parsed.bad.append(BadRow(file=path.name, row=1, reason="file has no text"))
    stem = slug(path.stem)
    for n, chunk in enumerate(chunks, start=1):
        answer_id = f"{stem}-{n}"
        parsed.answers.append(AnswerRow(answer_id=answer_id, answer=chunk, title=f"{path.stem} (part {n})",
                                        source=path.name, origin="text", row=n))
    return parsed


def expand_paths(paths: Iterable[Path | str]) -> list[Path]:
    """Files as given, directories expanded to the source files inside them (sorted)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SOURCE_SUFFIXES))
        elif path.is_file():
            out.append(path)
        else:
            raise TandemError(f"no such file or folder: {raw}")
    return out


def parse_file(path: Path, id_column: str = "answer_id", where: dict[str, str] | None = None) -> ParsedFile:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        header, rows = _read_csv(path)
        kind = csv_kind(header, id_column)
        if kind == "answers":
            return parse_answers_csv(path, rows, id_column, where)
        if kind == "questions":
            return parse_questions_csv(path, rows, id_column, where)
        raise TandemError(f"{path.name}: unrecognised CSV header ({','.join(header) or 'empty'}). Expected "
                          f"'{id_column},answer[,title,category,tags]' (answers) or 'query,{id_column}' (questions)")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise TandemError(f"{path.name} is not UTF-8 text") from None
    except OSError as exc:
        raise TandemError(f"cannot read {path} ({exc.strerror})") from None
    if suffix in MARKDOWN_SUFFIXES:
        return parse_markdown(path, text)
    if suffix in TEXT_SUFFIXES:
        return parse_text(path, text)
    raise TandemError(f"{path.name}: unsupported file type '{suffix}'. Use .csv, .md or .txt")


def validate(files: list[ParsedFile], known_answers: dict[str, str]) -> tuple[list[AnswerRow], list[QuestionRow], list[BadRow]]:
    """Cross-file checks: one text per answer_id within a run, and questions must point at an answer (or be an
    out-of-scope example)."""
    answers: dict[str, AnswerRow] = {}
    first_seen: dict[str, str] = {}
    bad: list[BadRow] = []
    for parsed in files:
        bad.extend(parsed.bad)
        name = Path(parsed.path).name
        for row in parsed.answers:
            previous = answers.get(row.answer_id)
            if previous is None:
                answers[row.answer_id] = row
                first_seen[row.answer_id] = f"{name} row {row.row}"
            elif previous.answer != row.answer:
                bad.append(BadRow(file=name, row=row.row, reason=(
                    f"duplicate answer_id '{row.answer_id}' with a different answer (first at {first_seen[row.answer_id]})")))
    questions: list[QuestionRow] = []
    for parsed in files:
        name = Path(parsed.path).name
        for question in parsed.questions:
            if question.answer_id in answers or question.answer_id in known_answers or question.answer_id == OUT_OF_SCOPE:
                questions.append(question)
            else:
                bad.append(BadRow(file=name, row=question.row,
                                  reason=f"answer_id '{question.answer_id}' is not in the knowledge base"))
    bad.sort(key=lambda b: (b.file, b.row))
    return list(answers.values()), questions, bad
