"""Fixtures of the ops tests."""

from __future__ import annotations

import pytest

from tests.conftest import fresh_db


@pytest.fixture
def cli_db(tmp_path, monkeypatch):
    """A database of the test's own that `tandem` commands run in this process read (TANDEM_DATABASE_URL)."""
    from core.settings import reset_settings

    db = fresh_db(tmp_path, "ops-cli")
    monkeypatch.setenv("TANDEM_DATABASE_URL", f"sqlite:///{tmp_path / 'ops-cli'}.db")
    reset_settings()
    yield db
    monkeypatch.undo()
    reset_settings()
