"""Language facts about a piece of text that several floors need (retrieval, features, prompts, checks)."""

from __future__ import annotations

import re

# Han, kana and hangul blocks: Chinese has no spaces between words, so these are tokenised by character.
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def has_cjk(text: str) -> bool:
    return bool(CJK_RUN.search(text))


def language_of(text: str) -> str:
    """'zh' when the message has Chinese words in it (two or more Han characters, or mostly Han), else 'en'.

    Mixed messages such as "我的 order 还没到" or "do you ship to 挪威？" count as Chinese: someone who types
    Chinese words reads Chinese, and the hand-written Chinese set expects Chinese answers for them. One stray
    character in a long English message (a brand name) does not switch the language.
    """
    han = len(_HAN.findall(text))
    latin = len(_LATIN.findall(text))
    return "zh" if han >= 2 or (han and han * 4 >= latin) else "en"
