"""Tokens the lexical (BM25) side of search matches on: whole words, CJK characters and bigrams, and character
n-grams of words for typo tolerance."""

from __future__ import annotations

import re
import unicodedata

from core.text import CJK_RUN as _CJK_RUN

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Chinese function characters ("how", "what", question particles): on a small KB BM25's idf cannot
# learn that they carry no topic, so "怎么申请退货" would match "忘记密码怎么办" on "怎么".
_CJK_STOP = frozenset("的了吗呢吧啊是我你您他她它们在有和与或就都也还要会能可以怎么什么哪些多少如何为请这那个吗？")
# Character n-grams of short function words only add noise; the whole word still counts.
_MIN_NGRAM_WORD = 4


def tokenize(text: str, ngram: int = 3) -> list[str]:
    """Word tokens, character n-grams of each word (typo tolerance) and CJK uni/bi-grams.

    Prefixes keep the three kinds apart in the vocabulary ("w:card" vs the trigram "g:car").
    """
    return word_tokens(text) + ngram_tokens(text, ngram)


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def word_tokens(text: str, segmenter: str = "chars") -> list[str]:
    """Whole words, plus Chinese as characters and character bigrams ("chars") or as jieba's words and the
    characters ("jieba"): Chinese has no spaces between words."""
    text = _normalise(text)
    tokens: list[str] = []
    for run in _CJK_RUN.findall(text):
        tokens.extend("c:" + ch for ch in run if ch not in _CJK_STOP)
        if segmenter == "jieba":
            tokens.extend("c:" + word for word in _jieba_words(run) if len(word) > 1)
        else:
            tokens.extend("c:" + run[i:i + 2] for i in range(len(run) - 1)
                          if not (run[i] in _CJK_STOP and run[i + 1] in _CJK_STOP))
    tokens.extend("w:" + word for word in _WORD.findall(_CJK_RUN.sub(" ", text)))
    return tokens


def _jieba_words(run: str) -> list[str]:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # its first call prints dictionary-loading chatter
    return jieba.lcut(run)


def ngram_tokens(text: str, ngram: int = 3) -> list[str]:
    """Character n-grams of each (non-CJK) word with boundary marks: a typo breaks only a few of them."""
    if not ngram:
        return []
    tokens: list[str] = []
    for word in _WORD.findall(_CJK_RUN.sub(" ", _normalise(text))):
        if len(word) >= _MIN_NGRAM_WORD:
            padded = f"#{word}#"
            tokens.extend("g:" + padded[i:i + ngram] for i in range(len(padded) - ngram + 1))
    return tokens
