"""The answer check: every LLM answer is compared with what it may use before the customer sees it.

Claims a shop must not invent are found with patterns: links and domains, email addresses, phone numbers,
amounts with a currency, percentages, durations ("30 days", "48 hours", "5-10个工作日") and order numbers. A
claim is *supported* when its value appears in the sources the answer may draw on: the retrieved help-center
answers, the knowledge-base draft, the customer's message and the conversation. Values are compared
normalised (a phone by its digits, an amount by its number, a duration by number and unit, a link by host and
path), so "$4.90" in an answer is supported by "4.90 USD" in the context, and "thirty" by "30".

Whole-answer problems are flagged too: cut off at the token limit, repeated lines, a reply in another language
than the customer's, an empty reply, a reply that repeats the system prompt.

What happens to a finding is the operator's policy (versioned with the thresholds): remove the claim, answer with
the knowledge-base draft instead, or hand the conversation to a human. Streaming never shows an unsupported claim:
text without a possible claim is passed on at once, a stretch that holds one is held back until its sentence
ends and is checked, then shown, cleaned or replaced (:class:`StreamChecker`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from core.pii import ASCII_END, ASCII_START, EMAIL_ADDRESS
from core.policy import DEFAULT_CHECK_ACTIONS
from core.text import HAN, language_of, other_script_share

CLAIM_KINDS = ("url", "email", "phone", "amount", "percent", "duration", "order")
# A removed claim leaves words that still make a sentence ("Visit our website for gift cards."), so a customer
# never reads a half sentence, and streaming never has to take back what it showed.
STAND_INS = {"url": "our website", "email": "our customer service", "phone": "our customer service",
             "order": "your order", "amount": "the amount shown at checkout", "percent": "the rate shown at checkout",
             "duration": "the time shown at checkout"}


def written_stand_ins(findings: Iterable[tuple[str, str]]) -> list[str]:
    """The stand-in words the check itself wrote into an answer, from its findings as (kind, action): they count
    as grounded. Words the model wrote do not, even when they read the same ("contact customer support")."""
    return sorted({STAND_INS[kind] for kind, action in findings if action == "remove" and kind in STAND_INS})

_EMAIL = re.compile(EMAIL_ADDRESS)
_TLDS = "com|org|net|io|co|shop|store|example|info|biz|uk|de|fr|cn"
_URL = re.compile(r"(?:https?://|www\.)[^\s<>()\[\]\"'，。]*[^\s<>()\[\]\"'，。.,;:!?]|"
                  rf"{ASCII_START}(?:[a-z0-9-]+\.)+(?:{_TLDS}){ASCII_END}(?:/[^\s<>()\[\]\"'，。]*[^\s<>()\[\]\"'，。.,;:!?])?",
                  re.IGNORECASE)
_PHONE = re.compile(r"(?<![A-Za-z0-9_.])\+?\(?\d[\d\s().-]{6,}\d" + ASCII_END)
_CURRENCY = r"(?:\$|€|£|¥|usd|eur|gbp|cny|rmb|dollars?|euros?|pounds?|美元|欧元|英镑|元|块)"
_NUMBER = r"\d+(?:[.,]\d+)?"
_AMOUNT = re.compile(rf"(?:[$€£¥]\s?{_NUMBER}|{_NUMBER}\s?{_CURRENCY})", re.IGNORECASE)
_PERCENT = re.compile(rf"{_NUMBER}\s?(?:%|％|percent\b|per cent\b)", re.IGNORECASE)
_UNIT = (r"(?:business\s+|working\s+|calendar\s+)?(?:minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)"
         r"|个?工作日|天|小时|分钟|周|星期|个月|年")
_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10, "twelve": 12, "fourteen": 14, "fifteen": 15, "twenty": 20, "thirty": 30, "forty-eight": 48,
                 "sixty": 60, "ninety": 90, "hundred": 100}
_DURATION = re.compile(rf"(\d+|{'|'.join(sorted(_WORD_NUMBERS, key=len, reverse=True))})"
                       rf"(?:\s?(?:-|–|to|至|到)\s?(\d+))?[\s-]?(?:(?:more|additional|extra|further|full)\s+)?({_UNIT})",
                       re.IGNORECASE)  # "2-5 more business days" states the same span as "2-5 business days"
_ORDER = re.compile(rf"{ASCII_START}(?:NW-\d{{6}}|#?W\d{{7}}){ASCII_END}"
                    r"|(?:order|订单)\s*(?:number|no\.?|#|号)?\s*:?\s*#?(\d{5,})", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
# A stretch of streamed text that may be (the start of) a claim: held back until its sentence ends.
# Built from the claim patterns' own parts: a claim the trigger missed would stream out unchecked.
_TRIGGER = re.compile(rf"\d|[$€£¥@]|https?:|www\.|\.(?:{_TLDS}){ASCII_END}|\b(?:{'|'.join(_WORD_NUMBERS)})\b",
                      re.IGNORECASE)
_LINE_END = re.compile(r"[.!?。！？…)\]\"'”]\s*$")


@dataclass(frozen=True)
class Claim:
    kind: str
    text: str          # as written in the answer
    key: tuple         # normalised value used for the comparison
    span: tuple[int, int]


@dataclass
class Finding:
    kind: str
    value: str
    action: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.value[:120], "action": self.action, "detail": self.detail}


@dataclass
class Verdict:
    """The checked answer: what to show, and why."""

    text: str
    findings: list[Finding] = field(default_factory=list)
    replace_with_draft: bool = False
    handoff: bool = False


def _number(text: str) -> float | None:
    # One comma and no dot is a decimal comma ("2,50 €"), unless three digits follow it ("$1,500").
    decimal_comma = text.count(",") == 1 and "." not in text and not re.search(r",\d{3}$", text)
    cleaned = text.replace(",", ".") if decimal_comma else text.replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return _WORD_NUMBERS.get(text.lower())


def _unit(text: str) -> str:
    word = text.lower()
    for unit, words in (("minute", ("min", "分钟")), ("hour", ("hour", "hr", "小时")), ("week", ("week", "周", "星期")),
                        ("month", ("month", "个月")), ("year", ("year", "年")), ("day", ("day", "工作日", "天"))):
        if any(w in word for w in words):
            return unit
    return word


def claims(text: str) -> list[Claim]:
    """Every checkable claim in ``text`` (a span is claimed by one kind only: emails before links, and so on)."""
    found: list[Claim] = []
    taken: list[tuple[int, int]] = []

    def add(kind: str, match: re.Match, key: tuple) -> None:
        span = match.span()
        if any(span[0] < end and start < span[1] for start, end in taken):
            return
        taken.append(span)
        found.append(Claim(kind, match.group(0), key, span))

    for match in _EMAIL.finditer(text):
        add("email", match, (match.group(0).lower(),))
    for match in _URL.finditer(text):
        add("url", match, (_url_key(match.group(0)),))
    for match in _ORDER.finditer(text):
        add("order", match, (re.sub(r"\D", "", match.group(0)) or match.group(0).upper(),))
    for match in _AMOUNT.finditer(text):
        number = _number(re.search(_NUMBER, match.group(0)).group(0))  # type: ignore[union-attr]
        add("amount", match, (number,))
    for match in _PERCENT.finditer(text):
        add("percent", match, (_number(re.search(_NUMBER, match.group(0)).group(0)),))  # type: ignore[union-attr]
    for match in _DURATION.finditer(text):
        unit = _unit(match.group(3))
        numbers = [n for n in (_number(match.group(1)), _number(match.group(2)) if match.group(2) else None)
                   if n is not None]
        add("duration", match, tuple((n, unit) for n in numbers))
    for match in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        if len(digits) >= 7:
            add("phone", match, (digits[-9:],))
    return sorted(found, key=lambda c: c.span)


def _url_key(url: str) -> str:
    url = url.lower().rstrip("/.,;:!?")
    url = re.sub(r"^https?://", "", url)
    return re.sub(r"^www\.", "", url)


def _supported(claim: Claim, sources: list[Claim], source_text: str) -> bool:
    if claim.kind == "url":
        # The same address, a host the sources name (in a link or an email address), or a page under a named path.
        wanted = claim.key[0]
        hosts = [s.key[0] for s in sources if s.kind == "url"]
        return wanted in source_text or any(wanted == k or wanted.startswith(k + "/") for k in hosts)
    if claim.kind == "duration":
        spans = {pair for s in sources if s.kind == "duration" for pair in s.key}
        return all(pair in spans for pair in claim.key)
    if claim.kind in ("amount", "percent"):
        figures = {s.key[0] for s in sources if s.kind in ("amount", "percent")}
        return claim.key[0] in figures
    if claim.kind == "phone":
        return any(s.kind == "phone" and s.key[0][-7:] == claim.key[0][-7:] for s in sources)
    return any(s.kind == claim.kind and s.key == claim.key for s in sources)


class AnswerCheck:
    """Checks one answer against its sources; ``actions`` maps a finding kind to remove | draft | handoff."""

    def __init__(self, sources: Iterable[str], message: str, actions: dict[str, str] | None = None,
                 system_prompt: str = ""):
        self.source_text = "\n".join(s for s in sources if s).lower()
        self.sources = claims(self.source_text)
        self.message = message
        self.actions = {**DEFAULT_CHECK_ACTIONS, **(actions or {})}
        self._prompt_fragments = _fragments(system_prompt)

    def unsupported(self, text: str) -> list[Claim]:
        return [c for c in claims(text) if not _supported(c, self.sources, self.source_text)]

    def clean(self, text: str) -> Verdict:
        """The claims of a complete stretch of text: unsupported ones removed or escalated per policy."""
        verdict = Verdict(text)
        for claim in reversed(self.unsupported(text)):  # from the end, so earlier spans stay valid
            action = self.actions.get(claim.kind, "remove")
            verdict.findings.insert(0, Finding(claim.kind, claim.text, action, "not in the context, the draft, the "
                                                                                "message or the conversation"))
            if action == "remove":
                start, end = claim.span
                verdict.text = verdict.text[:start] + STAND_INS[claim.kind] + verdict.text[end:]
            elif action == "handoff":
                verdict.handoff = True
            else:
                verdict.replace_with_draft = True
        return verdict

    def finish(self, text: str, finish_reason: str = "stop") -> Verdict:
        """The whole answer: its claims, then the problems only the whole can show."""
        verdict = self.clean(text)
        body = verdict.text
        if finish_reason == "length":
            trimmed = _last_full_sentence(body)
            verdict.findings.append(Finding("truncated", body[len(trimmed):].strip()[-80:],
                                            self.actions["truncated"], "cut off at the token limit"))
            body = trimmed if self.actions["truncated"] == "remove" else body
            self._escalate(verdict, "truncated")
        deduped, repeats = _dedupe(body)
        if repeats:
            verdict.findings.append(Finding("repeated", "; ".join(repeats)[:120], self.actions["repeated"],
                                            f"{len(repeats)} repeated line(s) or citation(s)"))
            body = deduped if self.actions["repeated"] == "remove" else body
            self._escalate(verdict, "repeated")
        if not body.strip():
            verdict.findings.append(Finding("empty", "", self.actions["empty"], "nothing left to say"))
            self._escalate(verdict, "empty", default_draft=True)
        elif self.message.strip() and (written_in := _other_language(body, self.message)):
            verdict.findings.append(Finding("language", written_in, self.actions["language"],
                                            f"the customer wrote in {language_of(self.message)}"))
            self._escalate(verdict, "language")
        if self._prompt_fragments and any(f in body.lower() for f in self._prompt_fragments):
            verdict.findings.append(Finding("prompt_echo", "", self.actions["prompt_echo"],
                                            "the reply repeats the system prompt"))
            self._escalate(verdict, "prompt_echo", default_draft=True)
        verdict.text = body.strip()
        return verdict

    def _escalate(self, verdict: Verdict, kind: str, default_draft: bool = False) -> None:
        action = self.actions[kind]
        if action == "handoff":
            verdict.handoff = True
        elif action == "draft" or (default_draft and action == "remove"):
            verdict.replace_with_draft = True


def _other_language(reply: str, message: str) -> str:
    """What the reply is written in when that is not the customer's language; '' when it is."""
    if other_script_share(reply) > 0.5 >= other_script_share(message):
        return "another script"
    written_in = language_of(reply)
    return written_in if written_in != language_of(message) else ""


def _fragments(prompt: str, size: int = 8) -> list[str]:
    words = prompt.lower().split()
    return [" ".join(words[i:i + size]) for i in range(0, len(words) - size + 1, size)]


def _last_full_sentence(text: str) -> str:
    ends = [m.end() for m in re.finditer(r"[.!?。！？](?=\s|$)", text)]
    return text[:ends[-1]] if ends else text


# A list marker does not make a line new: "[3] How do I track order?" repeats "[5] How do I track order?".
_LIST_MARKER = re.compile(r"^\s*(?:\[\d+\]|\(?\d+[.)]|[-*•])\s+")
# Where a sentence or clause ends: English punctuation before a space (not "4.90"), Chinese punctuation anywhere.
_CLAUSE_END = re.compile(r"(?<=[.!?;,])(?=\s)|(?<=[。！？；，])")
_MIN_REPEATED_CLAUSE = 10  # characters, a Han character counting two: "yes, yes" is speech, this long is a loop


def _repeat_key(text: str) -> str:
    return re.sub(r"\W+", " ", _LIST_MARKER.sub("", text).lower()).strip()


def _dedupe(text: str) -> tuple[str, list[str]]:
    """The text without repeated lines, clauses repeated within a line, and repeated citations."""
    seen: set[str] = set()
    kept: list[str] = []
    repeats: list[str] = []
    for line in text.split("\n"):
        key = _repeat_key(line)
        if key and key in seen:
            repeats.append(line.strip())
            continue
        seen.add(key)
        clauses: list[str] = []
        clause_keys: set[str] = set()
        for clause in _CLAUSE_END.split(line):
            clause_key = _repeat_key(clause)
            weight = len(clause_key) + len(HAN.findall(clause_key))
            if weight >= _MIN_REPEATED_CLAUSE and clause_key in clause_keys:
                repeats.append(clause.strip())
                continue
            clauses.append(clause)
            clause_keys.add(clause_key)
        kept.append("".join(clauses))
    out = "\n".join(kept)
    citations = [c.strip() for c in re.findall(r"\[\d+\][^\[\n]*", out)]
    for citation in {c for c in citations if citations.count(c) > 1}:
        first = out.find(citation) + len(citation)
        repeats.append(citation)
        out = out[:first] + re.sub(r"\s*" + re.escape(citation), "", out[first:])
    return out, repeats


class StreamChecker:
    """Streams an LLM answer through the check: pieces without a possible claim pass at once; a stretch that may
    hold one waits for its sentence to end, then goes out cleaned. After an unsupported claim whose action is
    draft or handoff, nothing more of the LLM's text is shown."""

    def __init__(self, check: AnswerCheck):
        self.check = check
        self.raw: list[str] = []
        self.shown: list[str] = []
        self.held = ""
        self.findings: list[Finding] = []
        self.stopped = False  # an escalating finding: the rest of the LLM text is withheld

    def feed(self, piece: str) -> str:
        """The text that may be shown now (possibly empty)."""
        self.raw.append(piece)
        if self.stopped:
            return ""
        self.held += piece
        out = ""
        while self.held:
            if not _TRIGGER.search(self.held):
                # Nothing claim-like: show everything up to the last space (a word may still grow into a claim).
                cut = max(self.held.rfind(" "), self.held.rfind("\n"))
                if cut < 0:
                    break
                out += self._emit(self.held[:cut + 1])
                self.held = self.held[cut + 1:]
                break
            boundary = _SENTENCE_END.search(self.held)
            if boundary is None:
                start = _TRIGGER.search(self.held).start()  # type: ignore[union-attr]
                cut = max(self.held.rfind(" ", 0, start), self.held.rfind("\n", 0, start))
                if cut >= 0:  # the words before the possible claim cannot carry it: show them
                    out += self._emit(self.held[:cut + 1])
                    self.held = self.held[cut + 1:]
                break
            sentence, self.held = self.held[:boundary.end()], self.held[boundary.end():]
            out += self._checked(sentence)
            if self.stopped:
                break
        return out

    def close(self) -> str:
        """What is left to show once the LLM has finished."""
        if self.stopped or not self.held:
            return ""
        held, self.held = self.held, ""
        return self._checked(held)

    def _checked(self, text: str) -> str:
        verdict = self.check.clean(text)
        self.findings += verdict.findings
        if verdict.replace_with_draft or verdict.handoff:
            self.stopped = True
            return ""
        return self._emit(verdict.text + (" " if verdict.text and not verdict.text.endswith((" ", "\n")) else ""))

    def _emit(self, text: str) -> str:
        self.shown.append(text)
        return text

    @property
    def raw_text(self) -> str:
        return "".join(self.raw)

    @property
    def shown_text(self) -> str:
        return "".join(self.shown)


def sources_of(hits: Sequence, draft_text: str, message: str, history: Sequence[dict[str, str]]) -> list[str]:
    """What an answer may use: the retrieved answers, the draft, the customer's message, the conversation."""
    return [*(getattr(h, "answer", "") for h in hits), draft_text, message, *(t.get("content", "") for t in history)]
