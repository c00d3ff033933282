"""`tandem kb` as a user runs it, in separate processes; the store must survive the process."""

import json
from pathlib import Path

import pytest

from core.encoders import load_encoder
from core.settings import get_settings
from knowledge.chroma_kb import ChromaKnowledgeBase
from tests.conftest import demo_rows, run_cli

DEMO = Path(__file__).resolve().parents[2] / "knowledge" / "demo"
pytestmark = pytest.mark.slow


def test_ingest_in_one_process_search_in_another(tmp_path):
    home = tmp_path / "home"
    bad = tmp_path / "extra.csv"
    bad.write_text("query,answer_id\nwhere is the moon,no_such_answer\n", encoding="utf-8")
    result = run_cli("kb", "ingest", str(DEMO / "answers.csv"), str(DEMO / "questions.csv"), str(bad),
                     "--no-progress", env={"TANDEM_HOME": str(home)})
    assert result.returncode == 1, result.stderr  # partial success: bad rows, good rows in
    assert "Traceback" not in result.stderr
    assert "bad row: extra.csv row 2: answer_id 'no_such_answer' is not in the knowledge base" in result.stderr
    answers, questions = demo_rows("answers.csv"), demo_rows("questions.csv")
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"ingested {answers} answers, {questions} questions; 1 bad row (see above); version ")
    version = summary.rsplit(" ", 1)[-1]

    # a new client in this process reads what the CLI wrote
    fresh = ChromaKnowledgeBase(load_encoder(settings=get_settings()), path=home / "chroma")
    assert fresh.version == version and len(fresh) == answers
    assert fresh.search("how do i track my package", k=1)[0].answer_id == "track_order"

    missing = run_cli("kb", "remove", "no_such_answer", env={"TANDEM_HOME": str(home)})
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no entry with answer_id 'no_such_answer'" in missing.stderr


def test_eval_prints_accuracy_and_latency_as_json():
    result = run_cli("kb", "eval", "--kb", str(DEMO / "answers.csv"), "--queries", str(DEMO / "questions.csv"),
                     "--limit", "60", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["queries"] == 60 and report["kb_answers"] == demo_rows("answers.csv")
    assert 0.75 <= report["top1"] <= report["top3"] <= 1.0
    assert report["search_p50_ms"] > 0 and report["end_to_end_p50_ms"] > report["search_p50_ms"]
