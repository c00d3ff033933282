"""Figures measured by `make eval` and `make bench` land in the README between named markers."""

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


def settings_markdown() -> str:
    """The configuration table: every setting, its env name, default and meaning, from core/settings.py."""
    from core.settings import Settings

    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = field.default if field.default is not None else ""
        if name == "home":
            default = ".tandem"
        # Defaults under the checkout are shown relative to it, so the table is the same in every clone.
        default = str(default).replace(str(REPO) + "/", "").replace(str(REPO.parent) + "/", "../")
        rows.append(f"| `TANDEM_{name.upper()}` | `{default}` | {(field.description or '').replace('|', '/')} |")
    return "\n".join(rows)
