"""Interpretable message features: what makes a request hard for a FAQ answer. Used by the learned
router next to the MiniLM embedding, and shown in the decision trace so an operator can read them."""

from __future__ import annotations

import math
import re

from core.pii import EMAIL, MASKED, ORDER_ID, PHONE

_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN_WORD = re.compile(r"[^\W\u3400-\u9fff]+(?:'[^\W\u3400-\u9fff]+)*", re.UNICODE)
# Chinese question particles at the end of a clause, counted like "?" (many messages leave the mark out).
_ZH_QUESTION = re.compile(r"[吗呢么](?=[\s，。！,.!]|$)")
CJK_CHARS_PER_WORD = 1.5  # a Chinese word is about 1.5 characters: lengths mean the same in both languages
_CLAUSE_SPLIT = re.compile(r"[,;.!?，。；！？]|\b(?:and|but|also|then|plus|while|because|so)\b", re.IGNORECASE)
_WHY = re.compile(r"\bwhy\b|为什么|为何", re.IGNORECASE)
_HOW = re.compile(r"\bhow\b|怎么|如何", re.IGNORECASE)
_COMPARE = re.compile(r"\b(?:compare|comparison|versus|vs\.?|difference|differ|better|cheaper|faster)\b|区别|比较",
                      re.IGNORECASE)
_RECOMMEND = re.compile(r"\b(?:recommend|suggest|should i|which (?:one|is)|best|advice|advise)\b|推荐|建议",
                        re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|cannot|can't|won't|don't|doesn't|didn't|isn't|"
                       r"aren't|wasn't|haven't|hasn't|without)\b|n't\b|不|没|别", re.IGNORECASE)
_COMPLAINT = re.compile(r"\b(?:terrible|awful|worst|angry|furious|unacceptable|ridiculous|disappointed|"
                        r"disgusted|complain|complaint|scam|fraud|lawyer|sue|useless|horrible|outraged|"
                        r"still (?:waiting|not)|again|third time)\b|!{2,}|投诉|生气|太差", re.IGNORECASE)
_CONDITIONAL = re.compile(r"\b(?:if|unless|otherwise|in case|instead|except)\b|如果|否则", re.IGNORECASE)
# Things a customer asks the shop to do. A FAQ answer explains one of them; a message that asks for several at once
# ("cancel one order, change the address of the other and merge the rest") needs someone to do them in order.
# Distinct actions are counted, so "not cancel, change" is two and "cancel, cancel" one.
_ACTION = re.compile(r"\b(?:(?:cancel|chang|modif|updat|edit|exchang|swap|return|refund|remov|delet|book|upgrad|"
                     r"downgrad|switch|transfer|merg|split|reissu|redeliver|resend|retry|reset|apply|send|move|"
                     r"combin|void|convert|replac)[a-z]*|add(?:s|ed|ing)?|clos(?:e|es|ed|ing))\b|取消|修改|改|换|"
                     r"退货|退款|删|加急|合并|拆|转|寄|补发|重发|开发票|申请", re.IGNORECASE)
_ACTION_STEM = {"chang": "change", "modif": "change", "updat": "change", "edit": "change", "修改": "change",
                "改": "change", "exchang": "swap", "换": "swap",
                "remov": "delete", "删": "delete", "寄": "send", "resend": "send", "重发": "send", "补发": "send",
                "merg": "merge", "combin": "merge", "合并": "merge", "return": "return", "退货": "return",
                "refund": "refund", "退款": "refund", "取消": "cancel", "void": "cancel"}
_ACTION_STEMS = sorted(_ACTION_STEM, key=len, reverse=True)  # longest first: "退货" before "退", "resend" before "send"
_MONEY = re.compile(r"[$€£¥]\s?\d|\b\d+(?:\.\d+)?\s?(?:usd|eur|dollars?|euros?)\b", re.IGNORECASE)
_FOLLOW_UP = re.compile(r"^(?:and|also|what about|how about|then|so|but|ok(?:ay)?|it|that|this|they|those|"
                        r"these|them|there)\b|\b(?:that|it|this one|the same)\b\s*[?？]?$|^那|^还有",
                        re.IGNORECASE)

FEATURE_NAMES = ("log_chars", "n_words", "n_clauses", "n_questions", "q_why", "q_how", "q_compare",
                 "q_recommend", "negation", "complaint", "conditional", "n_entities", "money", "cjk",
                 "follow_up", "n_actions")


def word_count(text: str) -> float:
    """Words in any script: Latin-script words, plus Chinese characters / 1.5 (Chinese has no spaces)."""
    return len(_LATIN_WORD.findall(text)) + len(_CJK.findall(text)) / CJK_CHARS_PER_WORD


def action_count(text: str) -> int:
    """How many different things the message asks the shop to do (cancel, change, return, send, ...)."""
    actions = set()
    for match in _ACTION.finditer(text):
        word = match.group(0).lower()
        stem = next((s for s in _ACTION_STEMS if word.startswith(s)), word[:5])
        actions.add(_ACTION_STEM.get(stem, stem))
    return len(actions)


def message_features(text: str, has_history: bool = False) -> dict[str, float]:
    words = word_count(text)
    clauses = [c for c in _CLAUSE_SPLIT.split(text) if c and c.strip() and len(c.strip()) > 2]
    # Masked placeholders ("[order]") count too: the request log stores masked text, and retraining on it must
    # see the same entities the live router saw.
    entities = (len(ORDER_ID.findall(text)) + len(EMAIL.findall(text)) + len(PHONE.findall(text))
                + len(MASKED.findall(text)))
    follow_up = bool(has_history and words <= 12 and _FOLLOW_UP.search(text.strip()))
    return {
        "log_chars": math.log1p(len(text)),
        "n_words": min(words, 200.0) / 20.0,
        "n_clauses": min(len(clauses), 20) / 4.0,
        "n_questions": min(text.count("?") + text.count("？") + len(_ZH_QUESTION.findall(text)), 5),
        "q_why": float(bool(_WHY.search(text))),
        "q_how": float(bool(_HOW.search(text))),
        "q_compare": float(bool(_COMPARE.search(text))),
        "q_recommend": float(bool(_RECOMMEND.search(text))),
        "negation": float(bool(_NEGATION.search(text))),
        "complaint": float(bool(_COMPLAINT.search(text))),
        "conditional": float(bool(_CONDITIONAL.search(text))),
        "n_entities": min(entities, 5),
        "money": float(bool(_MONEY.search(text))),
        "cjk": float(bool(_CJK.search(text))),
        "follow_up": float(follow_up),
        "n_actions": min(action_count(text), 6),
    }


def negation_signature(text: str) -> frozenset[str]:
    """The negation cues of a message; two messages may share a cached answer only if these match."""
    return frozenset(m.lower() for m in _NEGATION.findall(text))


def feature_vector(text: str, has_history: bool = False) -> list[float]:
    values = message_features(text, has_history)
    return [values[name] for name in FEATURE_NAMES]
