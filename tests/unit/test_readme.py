"""The README is a front page: it fits on a screen, shows the two commands, and links every page of the
documentation site, each of which exists and is in the site's navigation (mkdocs.yml)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def _nav_pages(nav: object) -> list[str]:
    """Every page file of mkdocs.yml's nav, however deeply its sections nest."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def test_the_readme_has_at_most_250_lines_and_shows_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text


def test_every_docs_link_in_the_readme_names_a_page_of_the_site_and_every_site_page_is_linked():
    text = README.read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(docs/([^)#]+\.md)(?:#[^)]*)?\)", text))
    nav = set(_nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))
    assert linked, "the README links no documentation page"
    assert not {page for page in linked if not (REPO / "docs" / page).is_file()}, "README links a missing page"
    assert linked <= nav, f"README links pages the site's nav leaves out: {sorted(linked - nav)}"
    assert nav <= linked, f"pages of the site the README does not link: {sorted(nav - linked)}"


def test_the_picture_the_readme_shows_is_in_the_repository():
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", README.read_text(encoding="utf-8"))
    assert images and all((REPO / image).is_file() for image in images)
