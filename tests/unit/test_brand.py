"""The brand is settings (issue 38): the shop name and support address reach the system prompt, the chain's own
notices and the no-answer draft from TANDEM_SHOP_NAME and TANDEM_SUPPORT_EMAIL, and the defaults are the demo
shop's."""

from __future__ import annotations

from chains import answers
from chains.answers import DEFAULT_BRAND, Brand, draft_answer, llm_messages, notices_for, system_prompt
from core.settings import Settings

ACME = Brand("Acme Outdoor", "help@acme.test")


def test_the_shop_and_its_address_reach_the_prompt_the_notices_and_the_no_answer_draft():
    assert "assistant of Acme Outdoor, an online shop" in system_prompt(ACME) and "Northwind" not in system_prompt(ACME)
    assert llm_messages("where is my tent?", [], [], brand=ACME)[0]["content"] == system_prompt(ACME)
    for language in ("en", "zh"):
        assert "help@acme.test" in notices_for(ACME)[language].no_answer
        assert "northwind" not in notices_for(ACME)[language].no_answer
    assert "help@acme.test" in draft_answer("where is my tent?", [], ACME).text  # nothing found: write to us


def test_the_default_brand_is_the_settings_defaults_the_demo_shop():
    fields = Settings.model_fields
    assert (DEFAULT_BRAND.shop, DEFAULT_BRAND.support_email) == (fields["shop_name"].default,
                                                                 fields["support_email"].default)
    assert system_prompt(DEFAULT_BRAND) == answers.SYSTEM_PROMPT and "Northwind Goods" in answers.SYSTEM_PROMPT
    assert "support@northwind.example" in answers.NOTICES["en"].no_answer
