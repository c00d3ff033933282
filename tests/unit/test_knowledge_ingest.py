"""Parsing of knowledge sources and the tokenizer: no model, no Chroma, just files in a tmp dir."""

from pathlib import Path

import pytest

from core.errors import TandemError
from knowledge.ingest import chunk_text, parse_file, validate
from knowledge.tokens import tokenize

DEMO = Path(__file__).resolve().parents[2] / "knowledge" / "demo"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_kind_is_detected_by_header_and_extra_columns_are_ignored(tmp_path):
    answers = parse_file(write(tmp_path / "a.csv", "answer_id,intent,category,answer\nx,i,C,Text x\n"))
    questions = parse_file(write(tmp_path / "q.csv", "query_id,query,answer_id\n1,hello?,x\n"))
    assert answers.kind == "answers" and answers.answers[0].answer == "Text x"
    assert answers.answers[0].category == "C"
    assert questions.kind == "questions" and questions.questions[0].answer_id == "x"


def test_bad_rows_name_file_and_row_and_good_rows_survive(tmp_path):
    answers = write(tmp_path / "answers.csv",
                    "answer_id,answer,title\n"
                    "good,Fine answer,Good\n"
                    ",orphan text,No id\n"          # row 3: missing id
                    "empty,,Empty\n"                # row 4: empty answer
                    "good,Another text,Clash\n")    # row 5: same id, different answer
    questions = write(tmp_path / "questions.csv",
                      "query,answer_id\nhow good?,good\n,good\nwhat?,nowhere\n")
    files = [parse_file(answers), parse_file(questions)]
    good_answers, good_questions, bad = validate(files, known_answers={})
    assert [a.answer_id for a in good_answers] == ["good"]
    assert [q.query for q in good_questions] == ["how good?"]
    assert [(b.file, b.row) for b in bad] == [("answers.csv", 3), ("answers.csv", 4), ("answers.csv", 5),
                                             ("questions.csv", 3), ("questions.csv", 4)]
    assert "missing answer_id" in bad[0].reason and "empty answer" in bad[1].reason
    assert "duplicate answer_id 'good'" in bad[2].reason and "answers.csv row 2" in bad[2].reason
    assert "empty query" in bad[3].reason and "'nowhere' is not in the knowledge base" in bad[4].reason
    assert str(bad[0]) == "answers.csv row 3: missing answer_id"


def test_question_may_point_at_an_answer_already_in_the_kb(tmp_path):
    questions = parse_file(write(tmp_path / "q.csv", "query,answer_id\nhi,old\n"))
    _, good, bad = validate([questions], known_answers={"old": "an answer stored earlier"})
    assert len(good) == 1 and not bad


def test_markdown_headings_are_questions_and_parent_heading_is_category(tmp_path):
    md = write(tmp_path / "faq.md", "# Shipping\n\n## How long does delivery take?\n\n3-5 business days.\n\n"
                                    "## Do you ship abroad?\nYes, to 30 countries.\n\n## Empty one\n")
    parsed = parse_file(md)
    assert [(a.title, a.answer, a.category) for a in parsed.answers] == [
        ("How long does delivery take?", "3-5 business days.", "Shipping"),
        ("Do you ship abroad?", "Yes, to 30 countries.", "Shipping")]
    assert parsed.answers[0].answer_id == "faq-how-long-does-delivery-take"
    assert [(b.row, b.reason) for b in parsed.bad] == [(10, "heading 'Empty one' has no answer text")]


def test_text_is_chunked_with_overlap_and_ids_from_file_name(tmp_path):
    sentences = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(60))
    parsed = parse_file(write(tmp_path / "Care Guide.txt", sentences))
    chunks = [a.answer for a in parsed.answers]
    assert len(chunks) >= 4 and all(len(c) <= 500 for c in chunks)
    assert [a.answer_id for a in parsed.answers[:2]] == ["care-guide-1", "care-guide-2"]
    assert chunks[0].endswith(".")  # cut at a sentence boundary
    tail_of_first = chunks[0][-60:]
    assert any(word in chunks[1] for word in tail_of_first.split()[-3:])  # overlap
    joined = " ".join(chunks)
    assert all(f"number {i} " in joined for i in range(60))  # nothing lost


def test_chunk_text_of_short_and_empty_text():
    assert chunk_text("short text") == ["short text"]
    assert chunk_text("   \n ") == []


def test_unknown_header_and_missing_file_are_one_line_errors(tmp_path):
    with pytest.raises(TandemError, match="unrecognised CSV header"):
        parse_file(write(tmp_path / "x.csv", "foo,bar\n1,2\n"))
    with pytest.raises(TandemError, match="unsupported file type"):
        parse_file(write(tmp_path / "x.pdf", "%PDF"))


def test_demo_files_parse_cleanly_and_every_chinese_answer_translates_an_english_one():
    files = [parse_file(DEMO / name) for name in ("answers.csv", "questions.csv", "answers_zh.csv",
                                                  "questions_zh.csv")]
    answers, questions, bad = validate(files, known_answers={})
    assert bad == [] and len(answers) == 56 + 56 and len(questions) == 285 + 168
    english = {a.answer_id for a in answers if a.lang == "en"}
    chinese = [a for a in answers if a.lang == "zh"]
    assert len(chinese) == 56 and {a.translation_of for a in chinese} == english


def test_tokenizer_has_words_trigrams_and_cjk_bigrams():
    tokens = tokenize("Refund 退货政策")
    assert "w:refund" in tokens and "g:#re" in tokens and "g:nd#" in tokens
    assert "c:退" in tokens and "c:退货" in tokens and "c:政策" in tokens
    # a typo still shares most trigrams with the correct spelling
    typo, right = set(tokenize("refnd")), set(tokenize("refund"))
    assert len(typo & right) >= 2
