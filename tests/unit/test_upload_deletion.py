"""Uploads are deleted once read (app/media.py, MediaReader.extract): only the text taken from them goes on. Files
outside the upload folder are never touched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app import media

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def _upload(folder: Path, asset: str) -> Path:
    """A file where Gradio puts an upload: a folder named by its hash inside the upload folder."""
    target = folder / "3f2a9c" / asset
    target.parent.mkdir(parents=True)
    shutil.copyfile(ASSETS / asset, target)
    return target


@pytest.mark.slow
def test_an_uploaded_photo_is_deleted_once_its_text_is_read(settings, tmp_path):
    reader = media.MediaReader(settings, upload_folders=[tmp_path])
    uploaded = _upload(tmp_path, "order_text.png")
    got = reader.extract([uploaded])
    assert "NW-104233" in got.read[0]
    assert not uploaded.exists() and not uploaded.parent.exists() and tmp_path.exists()


def test_an_uploaded_file_that_cannot_be_read_is_deleted_too(settings, tmp_path):
    reader = media.MediaReader(settings, upload_folders=[tmp_path])
    uploaded = [_upload(tmp_path / "a", "corrupt.png"), _upload(tmp_path / "b", "empty.wav")]
    got = reader.extract(uploaded)
    assert len(got.errors) == 2 and not any(path.exists() for path in uploaded)


def test_a_file_outside_the_upload_folder_is_kept(settings, tmp_path):
    reader = media.MediaReader(settings, upload_folders=[tmp_path / "uploads"])
    elsewhere = tmp_path / "kept" / "corrupt.png"
    elsewhere.parent.mkdir()
    shutil.copyfile(ASSETS / "corrupt.png", elsewhere)
    reader.extract([elsewhere, ASSETS / "empty.wav"])
    assert elsewhere.exists() and (ASSETS / "empty.wav").exists()


def test_the_default_upload_folder_is_gradios(settings, monkeypatch, tmp_path):
    from gradio.utils import get_upload_folder

    assert media.MediaReader(settings).upload_folders == [Path(get_upload_folder()).resolve()]
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    assert media.MediaReader(settings).upload_folders == [Path(get_upload_folder()).resolve()] == [tmp_path.resolve()]
