"""Where router parameters live: the artifact shipped in the repository, and the one an operator promoted.

A promoted artifact sits under ``$TANDEM_HOME/router/`` and wins over the shipped one. Promotion writes the
new file atomically and keeps the previous one, so a half-written file is never read and rollback is one step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.errors import TandemError

SHIPPED_ARTIFACT = Path(__file__).resolve().parent.parent / "artifacts" / "router.json"
ACTIVE_NAME = "router.json"
PREVIOUS_NAME = "router.previous.json"


def router_dir(home: Path) -> Path:
    return home / "router"


def active_path(home: Path) -> Path:
    promoted = router_dir(home) / ACTIVE_NAME
    return promoted if promoted.is_file() else SHIPPED_ARTIFACT


def read_artifact(path: Path) -> dict[str, Any]:
    """The parameters in ``path``; a missing or unreadable file is one clear error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TandemError(f"router artifact {path} is missing. Fix: `tandem router train` or remove the promoted "
                          "file to use the shipped one") from None
    except (OSError, ValueError) as exc:
        raise TandemError(f"router artifact {path} is unreadable ({exc.__class__.__name__}). Fix: `tandem router "
                          f"rollback`, or delete it to use the shipped router") from None
    if not isinstance(data, dict):
        raise TandemError(f"router artifact {path} is not a JSON object. Fix: `tandem router rollback`")
    return data


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def promote(home: Path, candidate: Path) -> Path:
    """Make ``candidate`` the live router of every app using this TANDEM_HOME; the old one is kept for rollback."""
    body = read_artifact(candidate)  # refuse a broken candidate before anything changes
    live = router_dir(home) / ACTIVE_NAME
    if live.is_file():
        _write_atomically(router_dir(home) / PREVIOUS_NAME, live.read_text(encoding="utf-8"))
    _write_atomically(live, json.dumps(body, indent=1))
    return live


def rollback(home: Path) -> Path:
    """Put the previously promoted router back (or the shipped one, when there was none)."""
    previous = router_dir(home) / PREVIOUS_NAME
    live = router_dir(home) / ACTIVE_NAME
    if previous.is_file():
        _write_atomically(live, previous.read_text(encoding="utf-8"))
        previous.unlink()
    elif live.is_file():
        live.unlink()
    return active_path(home)
