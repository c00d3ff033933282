"""The README's configuration table is generated from the settings (offline/readme.py settings_markdown) and must
stay complete: a setting nobody can find is a setting nobody can use."""

from __future__ import annotations

from core.settings import Settings
from offline.readme import README, settings_markdown


def test_the_readme_lists_every_setting_as_the_settings_describe_it():
    text = README.read_text(encoding="utf-8")
    missing = [f"TANDEM_{name.upper()}" for name in Settings.model_fields if f"`TANDEM_{name.upper()}`" not in text]
    assert not missing, f"README configuration table lacks {missing}; regenerate it with settings_markdown()"
    section = text.split("<!-- config:start -->", 1)[1].split("<!-- config:end -->", 1)[0].strip()
    assert section == settings_markdown()
