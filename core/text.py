"""Language facts about a piece of text that several floors need (retrieval, features, prompts, checks)."""

from __future__ import annotations

import functools
import re
import unicodedata

# Han, kana and hangul blocks: Chinese has no spaces between words, so these are tokenised by character.
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def has_cjk(text: str) -> bool:
    return bool(CJK_RUN.search(text))


def language_of(text: str) -> str:
    """'zh' when the message has Chinese words in it (two or more Han characters, or mostly Han), else 'en'.

    Mixed messages such as "我的 order 还没到" or "do you ship to 挪威？" count as Chinese: someone who types
    Chinese words reads Chinese, and the hand-written Chinese set expects Chinese answers for them. One stray
    character in a long English message (a brand name) does not switch the language.
    """
    han = len(HAN.findall(text))
    latin = len(_LATIN.findall(text))
    return "zh" if han >= 2 or (han and han * 4 >= latin) else "en"


# Scripts a reply to an English or Chinese message may be written in.
_OWN_SCRIPTS = ("LATIN", "CJK", "FULLWIDTH LATIN", "HIRAGANA", "KATAKANA", "HANGUL")


def other_script_share(text: str) -> float:
    """Share of the letters that are neither Latin nor CJK (Hebrew, Cyrillic, Arabic, ...). ``language_of`` knows
    only English and Chinese, so a reply in Hebrew to an English message would pass as English without this."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(not unicodedata.name(c, "").startswith(_OWN_SCRIPTS) for c in letters) / len(letters)


@functools.lru_cache(maxsize=65536)  # bounded: a catalog replaced many times brings new phrases
def compiled(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled once per process. The catalog builds a pattern per phrase it knows (field words, kind
    names, colours: thousands), past the 512 that ``re`` keeps: without this every message compiled them all again
    (34 ms of a 35 ms catalog answer in the bench of 2026-12-07, 23:02)."""
    return re.compile(pattern)


def han_bigrams(text: str) -> set[str]:
    """Chinese as character bigrams, each run of Han characters on its own: a single character says too little
    ("人工智能会取代人类" shares characters with any help-center text, hardly a bigram)."""
    return {run[i:i + 2] for run in _HAN_RUN.findall(text) for i in range(len(run) - 1)}


_HAN_RUN = re.compile(r"[\u3400-\u9fff]+")
