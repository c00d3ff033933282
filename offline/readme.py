"""A named section of a Markdown file, rewritten between `<!-- name:start -->` and `<!-- name:end -->` markers.

The measured tables live in docs/results.md, generated from reports/ by scripts/gen_docs.py."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


def update_readme_section(name: str, section: str, readme: Path = README) -> None:
    """Rewrite only what lies between `<!-- name:start -->` and `<!-- name:end -->` (appended when absent)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    block = f"{start}\n{section.strip()}\n{end}"
    if start in text and end in text and text.index(start) < text.index(end):
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    readme.write_text(text, encoding="utf-8")

