"""Rules and tools: keyword/regex routes an operator edits in YAML, and the order-status tool (the tool tier runs it).

The order tool only shows an order to the user it belongs to; to anyone else the order does not exist
(saying "not yours" would confirm that the number is valid).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml
from sqlmodel import select

from chains.schema import HANDOFF_ROUTE, LLM_ROUTE, SMALL_ROUTE, TOOL_ROUTE
from core.pii import ASCII_START, order_ids
from core.text import has_cjk, language_of
from storage.db import Database
from storage.tables import Order

log = logging.getLogger(__name__)
ROUTES = (TOOL_ROUTE, LLM_ROUTE, SMALL_ROUTE, HANDOFF_ROUTE)  # where an operator's rule may send a message


@dataclass(frozen=True)
class Rule:
    name: str
    route: str
    reason: str = ""
    pattern: re.Pattern | None = None
    keywords: tuple[str, ...] = ()
    tool: str = ""

    def matches(self, text: str) -> bool:
        if self.pattern is not None and not self.pattern.search(text):
            return False
        if self.keywords:
            return self.keyword_pattern.search(text) is not None
        return self.pattern is not None

    @cached_property
    def keyword_pattern(self) -> re.Pattern:
        """A keyword must start a word ("track" finds "tracking", "eta" does not find "details"); a Chinese one,
        written without spaces, may appear anywhere."""
        return re.compile("|".join(re.escape(word) if has_cjk(word) else ASCII_START + re.escape(word)
                                   for word in self.keywords), re.IGNORECASE)


@dataclass
class RuleBook:
    """The rules in ``path``, re-read whenever the file changes on disk (an operator's edit goes live)."""

    path: Path
    rules: list[Rule] = field(default_factory=list)
    problem: str = ""  # why the file on disk is not in use (the last good rules still are)
    version: str = ""  # hash of the rules in use: cached answers are keyed by it, so an edit retires them
    # Rules passed over though they match: a handoff trigger switched off in the settings (chains/runtime.py).
    skip: Callable[[Rule], bool] | None = None
    _mtime: float = -1.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def match(self, text: str) -> Rule | None:
        self._reload_if_changed()
        return next((rule for rule in self.rules if rule.matches(text) and not (self.skip and self.skip(rule))), None)

    def current_version(self) -> str:
        """The version of the rules as on disk now (re-read first when the file changed)."""
        self._reload_if_changed()
        return self.version

    def _reload_if_changed(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            return
        if mtime == self._mtime:
            return
        with self._lock:
            self._mtime = mtime
            try:
                text = self.path.read_text(encoding="utf-8")
                self.rules = parse_rules(text)
                self.version = hashlib.sha1(text.encode()).hexdigest()[:8]
                self.problem = ""
            except (OSError, ValueError, KeyError, TypeError, re.error, yaml.YAMLError) as exc:
                # A typo in the file must not stop answers: keep the last good rules and say why.
                self.problem = f"{self.path}: {exc.__class__.__name__}: {exc}"[:300]
                log.error("rules not reloaded: %s", self.problem)


def parse_rules(text: str) -> list[Rule]:
    data = yaml.safe_load(text) or {}
    rules = []
    for raw in data.get("rules", []):
        route = raw["route"]
        if route not in ROUTES:
            raise ValueError(f"rule {raw.get('name')!r}: route must be one of {', '.join(ROUTES)}, got {route!r}")
        if route == "tool" and raw.get("tool") not in TOOLS:
            raise ValueError(f"rule {raw.get('name')!r}: unknown tool {raw.get('tool')!r}; known: {', '.join(TOOLS)}")
        rules.append(Rule(name=raw["name"], route=route, reason=raw.get("reason", ""), tool=raw.get("tool", ""),
                          pattern=re.compile(raw["pattern"], re.IGNORECASE) if raw.get("pattern") else None,
                          keywords=tuple(k.lower() for k in raw.get("keywords", []))))
    return rules


# A tool's detail may carry, under this key, its answer as logs and conversation memory may keep it (masked).
LOGGED_ANSWER = "logged_answer"


@dataclass(frozen=True)
class ToolResult:
    answer: str
    detail: dict


@dataclass(frozen=True)
class OrderReplies:
    """The order tool's sentences in one language; a status not in ``statuses`` is shown as stored."""

    ask: str
    missing: str
    status: str
    carrier: str
    eta: str
    sentence_gap: str
    item_separator: str
    statuses: dict[str, str] = field(default_factory=dict)


ORDER_REPLIES = {
    "en": OrderReplies(
        ask="Please tell me your order number (it looks like NW-123456).",
        missing="I can't find order {id} on your account. Please check the number, or sign in with the account "
                "you ordered with.",
        status="Order {id} ({items}) is **{status}**.",
        carrier="It travels with {carrier}, tracking number {tracking}.",
        eta="Expected delivery: {eta}.", sentence_gap=" ", item_separator=", "),
    "zh": OrderReplies(
        ask="请告诉我您的订单号（格式如 NW-123456）。",
        missing="在您的账户中找不到订单{id}。请核对订单号，或用下单时的账户登录。",
        status="订单{id}（{items}）**{status}**。", carrier="承运商：{carrier}，运单号：{tracking}。",
        eta="预计送达：{eta}。", sentence_gap="", item_separator="、",
        statuses={"processing": "处理中", "shipped": "已发货", "delivered": "已签收", "cancelled": "已取消",
                  "returned": "已退货"}),
}


def order_status(text: str, user_id: str, db: Database) -> ToolResult:
    """Read the order named in the message, for its owner only, in the message's language."""
    reply = ORDER_REPLIES[language_of(text)]
    wanted = order_ids(text)
    if not wanted:
        return ToolResult(reply.ask, {"found": False})
    order_id = wanted[0]
    with db.session() as session:
        order = session.exec(select(Order).where(Order.order_id == order_id)).first()
    if order is None or not user_id or order.user_id != user_id:
        return ToolResult(reply.missing.format(id=order_id),
                          {"found": False, "order_id": order_id, "owner_check": "failed" if order else "no order"})
    items = reply.item_separator.join(item.strip() for item in order.items.split("|"))
    answer = _order_reply(reply, order, order.order_id, items, order.tracking_number)
    # The copy that logs, conversation memory and traces keep (chains/service.py stores it when masking is on):
    # the same sentences without whose order it is: number, items and tracking number are placeholders; status,
    # carrier and delivery date stay, so operators can still see what the customer was told.
    logged = _order_reply(reply, order, "[order]", "[items]", "[tracking]")
    return ToolResult(answer, {"found": True, "order_id": order_id, "status": order.status, LOGGED_ANSWER: logged})


def _order_reply(reply: OrderReplies, order: Order, order_id: str, items: str, tracking: str) -> str:
    parts = [reply.status.format(id=order_id, items=items, status=reply.statuses.get(order.status, order.status))]
    if order.carrier and order.tracking_number:
        parts.append(reply.carrier.format(carrier=order.carrier, tracking=tracking))
    if order.eta and order.status not in ("delivered", "cancelled", "returned"):
        parts.append(reply.eta.format(eta=order.eta))
    return reply.sentence_gap.join(parts)


# A message that is only courtesy (a greeting, a thank-you, a goodbye) gets a courteous reply of its own: the help
# center has nothing to say to it, and the LLM's polite answer ("Thank you for your kind words!") grounds nothing,
# so the answer check rightly refused it and the customer was offered a colleague for saying thanks (make demo,
# 2026-12-06). The rule in rules.yaml decides that the whole message is courtesy; this picks which reply.
_COURTESY_KINDS = (  # the first kind found in the message, in this order
    ("bye", re.compile(r"\b(?:bye|goodbye|see you|that'?s all|have a (?:nice|good|great) (?:day|one))\b|再见|拜拜",
                       re.IGNORECASE)),
    ("thanks", re.compile(r"\b(?:thank|thanks|thx|cheers|appreciated?|helpful)\b|谢|感谢", re.IGNORECASE)),
    ("how_are_you", re.compile(r"\bhow (?:are|r) (?:you|u)\b|\bhow'?s it going\b|\bhope you'?re well\b|你好吗|"
                               r"过得怎么样|最近好吗", re.IGNORECASE)),
)
COURTESY_REPLIES = {
    "en": {"bye": "You're welcome, and thank you for contacting us. Have a great day!",
           "thanks": "You're welcome! Is there anything else I can help you with?",
           "how_are_you": "I'm doing well, thank you for asking! How can I help you today?",
           "greeting": "Hello! How can I help you today?"},
    "zh": {"bye": "不客气，感谢您的咨询，祝您愉快！", "thanks": "不客气！还有什么可以帮您的吗？",
           "how_are_you": "我很好，谢谢关心！请问有什么可以帮您？", "greeting": "您好！请问有什么可以帮您？"},
}


def courtesy(text: str, user_id: str, db: Database) -> ToolResult:
    """The courteous reply to a greeting, a thank-you or a goodbye, in the message's language."""
    kind = next((name for name, pattern in _COURTESY_KINDS if pattern.search(text)), "greeting")
    return ToolResult(COURTESY_REPLIES[language_of(text)][kind], {"kind": kind})


# Whoever asks whether they are talking to a machine is told so, plainly, with the way to a person: a customer has a
# right to know (the EU AI Act's transparency duty for chatbots), and the help center has no answer to cite, so the
# LLM's reply was replaced by "I'm not sure our help center covers that" (make demo, 2026-12-06).
ASSISTANT_REPLIES = {
    "en": "I'm an automated assistant: I answer from our help center. A colleague can take over at any time: press "
          "\"Talk to a human\".",
    "zh": "我是自动客服助手，根据帮助中心的内容回答问题。如需人工服务，可随时点击“Talk to a human”。",
}


def assistant_identity(text: str, user_id: str, db: Database) -> ToolResult:
    """The answer to "are you a bot?": an automated assistant, and how to reach a person, in the message's language."""
    return ToolResult(ASSISTANT_REPLIES[language_of(text)], {"kind": "assistant_identity"})


TOOLS: dict[str, Callable[[str, str, Database], ToolResult]] = {
    "order_status": order_status, "courtesy": courtesy, "assistant_identity": assistant_identity}
