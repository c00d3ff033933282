"""What every attachment reader shares: the customer-facing error, and the size check made before any decoding."""

from __future__ import annotations

from pathlib import Path

from core.errors import TandemError


class AttachmentError(TandemError):
    """A file the customer sent could not be used; the message says which and why, in plain words."""


def check_size(path: Path, limit_mb: float) -> int:
    try:
        size = path.stat().st_size
    except OSError:
        raise AttachmentError(f"{path.name}: the upload did not arrive; please attach it again.") from None
    if size > limit_mb * 1024 * 1024:
        raise AttachmentError(f"{path.name} is {human_size(size)}; the limit is {limit_mb:g} MB. "
                              "Please send a smaller file.")
    if size == 0:
        raise AttachmentError(f"{path.name} is empty (0 bytes); please record or attach it again.")
    return size


def human_size(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB" if size >= 1024 * 1024 else f"{size / 1024:.0f} kB"
