"""`scripts/need-disk`: `make setup` stops with a clear message before pip fills a full disk."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "need-disk"


def test_need_disk_passes_when_enough_space_is_free():
    done = subprocess.run([str(SCRIPT), "0", "the app's venv"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stderr == ""


def test_need_disk_names_the_shortfall_when_the_disk_is_too_full():
    # No disk here has a million GiB free: the check must fail and say what, where and how much.
    done = subprocess.run([str(SCRIPT), "1000000", "the app's venv"], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "building the app's venv needs about 1000000 GiB free on the disk of" in done.stderr
    assert "GiB are." in done.stderr and "Free some space" in done.stderr
