"""The generated documentation pages stay true: every setting is documented in exactly one group of the
configuration reference, and the committed configuration and results pages are what scripts/gen_docs.py writes
from core/settings.py and reports/."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings

from core.settings import SETTING_GROUPS, Settings
from scripts import gen_docs


def test_every_setting_is_in_exactly_one_group_and_has_a_description():
    counts = Counter(name for names in SETTING_GROUPS.values() for name in names)
    fields = Settings.model_fields
    assert not [name for name in fields if counts[name] == 0], "settings in no group of SETTING_GROUPS"
    assert not [name for name, n in counts.items() if n > 1], "settings in more than one group"
    assert not [name for name in counts if name not in fields], "SETTING_GROUPS names settings that do not exist"
    assert not [name for name, field in fields.items() if not (field.description or "").strip()], \
        "settings without a description"


def test_the_committed_configuration_page_is_what_the_generator_writes():
    committed = gen_docs.CONFIGURATION.read_text(encoding="utf-8")
    assert committed == gen_docs.configuration_markdown(), "stale: run python -m scripts.gen_docs"
    for name in Settings.model_fields:
        assert f"| `TANDEM_{name.upper()}` |" in committed


def test_the_committed_results_page_is_what_the_generator_writes_from_the_reports():
    assert gen_docs.RESULTS.read_text(encoding="utf-8") == gen_docs.results_markdown(), \
        "stale: run python -m scripts.gen_docs"


def test_a_setting_in_no_group_is_still_listed_and_a_missing_report_is_named(tmp_path: Path):
    class Extra(BaseSettings):
        documented: int = Field(1, description="In a group.")
        forgotten: str = Field("x", description="In no group.")

    page = gen_docs.configuration_markdown(Extra.model_fields, {"ops": ("documented", "gone")})
    assert "## Not in a group yet" in page and "| `TANDEM_FORGOTTEN` | str | `x` | In no group. |" in page
    assert "TANDEM_GONE" not in page
    results = gen_docs.results_markdown(tmp_path / "eval.json", tmp_path / "bench.json")
    assert results.count("Not measured yet") == 5  # routing, answers, handoff triggers, catalog, benchmarks


def test_check_finds_a_page_that_differs_from_what_the_generator_writes(tmp_path: Path):
    current, old = tmp_path / "current.md", tmp_path / "old.md"
    current.write_text("same\n", encoding="utf-8")
    old.write_text("before\n", encoding="utf-8")
    assert gen_docs.stale({current: "same\n", old: "after\n", tmp_path / "absent.md": "x\n"}) == [
        old, tmp_path / "absent.md"]
