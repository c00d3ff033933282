"""Knowledge-base store faults at start: Chroma folder missing, or chroma.sqlite3 overwritten with garbage.

Expected (SECURITY.md, fault model): a missing folder opens as an empty KB (`tandem serve` re-seeds the
demo KB; without seeding every message is answered with the "not covered, talk to a human" answer and
logged); a damaged store stops start-up with one line that names the fix, never a traceback.
"""

from __future__ import annotations

import shutil

import pytest

from chains.answers import NOTICES
from chains.schema import ChatRequest
from core.errors import TandemError
from knowledge.chroma_kb import ChromaKnowledgeBase
from tests.conftest import run_cli
from tests.reliability.conftest import make_service, session_rows

pytestmark = pytest.mark.slow


def test_missing_chroma_folder_opens_empty_and_every_message_is_answered(tmp_path, settings, db, encoder):
    folder = tmp_path / "chroma"
    kb = ChromaKnowledgeBase(encoder, path=folder)
    assert len(kb) == 0
    shutil.rmtree(folder)  # deleted while configured: the next open recreates it empty
    kb = ChromaKnowledgeBase(encoder, path=folder)
    service = make_service(settings, db, kb)
    before = session_rows(db)
    response = service.answer(ChatRequest(message="How do I track my order?", channel="api"))
    assert response.route == "small" and response.answer.startswith(NOTICES["en"].no_answer)
    assert session_rows(db) - before == 1


def test_corrupt_chroma_store_is_one_clear_line(tmp_path, encoder):
    folder = tmp_path / "chroma"
    folder.mkdir()
    (folder / "chroma.sqlite3").write_bytes(b"this is not a database " * 4000)
    with pytest.raises(TandemError, match=r"damaged .*tandem init"):
        ChromaKnowledgeBase(encoder, path=folder)

    result = run_cli("kb", "stats", env={"TANDEM_HOME": str(tmp_path)})
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert "is damaged" in result.stderr and "tandem kb ingest" in result.stderr
