"""Who holds a conversation: the one place that knows, and the only one that changes it.

A conversation is with the bot, waiting for a person (the inbox's queue), with a person (one operator, by name),
or back with the bot after a person handed it back. :data:`TRANSITIONS` lists every allowed change; each one is a
compare-and-set on the ``conversation_states`` row (``UPDATE ... WHERE status = <the status read>``), written with
its ``conversation_events`` row (who, when, why) in one transaction. So two operators never hold the same
conversation, on one replica or many: the second claim finds the status changed and gets :class:`Taken`.

The service (chains/service.py) asks :meth:`Conversations.state` before the chain runs: while a person holds the
conversation the bot sends nothing. The inbox (the agent API, app/inbox_routes.py; the console) claims, replies,
transfers and releases through here.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, func, select

from chains import metrics
from chains.cache import normalise
from chains.contact import offline_line, partly_hidden
from core.errors import TandemError
from storage.customers import customer_of, signed_customers
from storage.db import Database
from storage.tables import ChatMessage, ConversationEvent, ConversationState, OperatorSeen, utcnow

log = logging.getLogger(__name__)
BOT, WAITING, HUMAN, RETURNED = "bot", "waiting", "human", "returned"
STATUSES = (BOT, WAITING, HUMAN, RETURNED)
# (from, to) -> the action's name. Anything else is an IllegalTransition: a person cannot take a conversation
# nobody asked a person for (claim needs waiting), the bot cannot take one back from a person except by release.
TRANSITIONS: dict[tuple[str, str], str] = {
    (BOT, WAITING): "handoff", (RETURNED, WAITING): "handoff",
    (WAITING, HUMAN): "claim",
    (WAITING, BOT): "cancel",
    (HUMAN, HUMAN): "transfer",
    (HUMAN, WAITING): "requeue",
    (HUMAN, RETURNED): "release",
}
# What started a handoff (ConversationState.trigger), each switched by a setting (core/settings.py, handoff_*).
BUTTON, ASKED, RULE, ANSWER_CHECK, VIP, REPEAT = "button", "asked", "rule", "answer_check", "vip", "repeat"
ANGER, LEGAL, COMPLAINT = "anger", "legal", "complaint"
PHOTO = "photo"  # a product photo the catalog found nothing for: a person looks at it (packet["photos"])
# The shipped rule (chains/rules.yaml) by which a customer asks for a person in words: trigger ASKED, not RULE.
ASKS_FOR_A_PERSON = "asks-for-a-person"
# Shipped handoff rules (chains/rules.yaml) that are triggers of their own, each switched by its own setting; any
# other rule with route handoff (an operator's own) is the trigger RULE.
RULE_TRIGGERS = {ASKS_FOR_A_PERSON: ASKED, "legal-threat": LEGAL, "anger": ANGER, "complaint-about-answer": COMPLAINT}
# Claims whose wait makes the expected wait (their median), and how far back they may be.
WAIT_SAMPLE, WAIT_HORIZON = 20, timedelta(days=1)
# Messages the customer-facing roles stand for; "note" (an operator's hand-back summary) is for the bot only.
CUSTOMER_ROLES = {"user": "customer", "assistant": "assistant", "operator": "operator"}


class IllegalTransition(TandemError):
    """The change is not allowed from the conversation's status now (``status``)."""

    def __init__(self, message: str, status: str = "", operator: str = ""):
        super().__init__(message)
        self.status, self.operator = status, operator


class Taken(IllegalTransition):
    """Another operator holds the conversation (or took it first)."""


def action_of(from_status: str, to_status: str) -> str:
    """The allowed change's name, or IllegalTransition."""
    action = TRANSITIONS.get((from_status, to_status))
    if action is None:
        raise IllegalTransition(f"a conversation cannot go from {from_status} to {to_status}", from_status)
    return action


@dataclass(frozen=True)
class Triggers:
    """Which triggers may start a handoff (the handoff_* settings)."""

    button: bool = True
    asked: bool = True
    rule: bool = True
    answer_check: bool = True
    vip: bool = True
    repeat: bool = False
    anger: bool = True
    legal: bool = True
    complaint: bool = True
    photo: bool = True

    def allows(self, trigger: str) -> bool:
        return bool(getattr(self, trigger, False))


def rule_trigger(rule: Any) -> tuple[str, str]:
    """(trigger, reason) of a rule with route handoff: its own trigger for the shipped ones (RULE_TRIGGERS), else
    RULE; the reason names the rule and says why it hands over."""
    return RULE_TRIGGERS.get(rule.name, RULE), f"rule {rule.name}: {rule.reason}".strip(": ")


def repeated(text: str, history: list[dict[str, str]], rule: Any = None) -> str:
    """Why the customer is not helped ("" when they may be): they ask again, word for word (case and punctuation
    aside), what they asked last, and were answered. Courtesy said twice ("thanks", "hi": ``rule`` is the courtesy
    tool) is no repeat. Saying so in words ("that didn't help") is the rule complaint-about-answer, trigger
    COMPLAINT."""
    if rule is not None and getattr(rule, "tool", "") == "courtesy":
        return ""
    users = [t["content"] for t in history if t.get("role") == "user"]
    answered = bool(history) and history[-1].get("role") == "assistant"
    if users and answered and normalise(users[-1]) == normalise(text) and len(normalise(text)) > 3:
        return "the customer asked the same question again after an answer"
    return ""


def message_trigger(rules: Any, triggers: Triggers, text: str,
                    history: Sequence[dict[str, str]] = ()) -> tuple[str, str]:
    """The handoff a message's own words start, before any answer: a handoff rule that matches (``rules`` is the
    RuleBook, which passes over a rule whose trigger is switched off), else a repeat; (trigger, reason) of the first
    that ``triggers`` allows, ("", "") for none. The service decides with the same two steps (the rules step of the
    chain, then ChatService._trigger); `make eval` measures this (offline/handoff_eval.py)."""
    rule = rules.match(text)
    candidates = [rule_trigger(rule)] if rule is not None and rule.route == "handoff" else []
    if said := repeated(text, list(history), rule):
        candidates.append((REPEAT, said))
    return next((c for c in candidates if triggers.allows(c[0])), ("", ""))


def rule_skipped(triggers: Triggers) -> Callable[[Any], bool]:
    """The RuleBook's ``skip``: a handoff rule whose trigger is switched off is passed over as if it did not match."""
    return lambda rule: rule.route == "handoff" and not triggers.allows(RULE_TRIGGERS.get(rule.name, RULE))


class Conversations:
    """The state machine over one database. ``scrub`` masks what is stored (the PII mask, as for the request log);
    ``online_window_s``: an operator seen in the inbox this recently counts as online; ``reply_within_days``: with
    nobody online, the customer is asked for an email address and promised a reply within this many business days."""

    def __init__(self, db: Database, scrub: Callable[[str], str] = lambda text: text,
                 clock: Callable[[], datetime] = utcnow, online_window_s: float = 300.0,
                 triggers: Triggers = Triggers(), notify: Callable[[str, dict[str, Any]], None] | None = None,
                 reply_within_days: int = 1):
        self.db, self.scrub, self.clock = db, scrub, clock
        self.online_window_s, self.triggers, self.reply_within_days = online_window_s, triggers, reply_within_days
        # Told of every operator message ("message") and state change ("handoff"): the shop's webhook
        # (chains/handoff_webhook.py); None: nobody.
        self.notify = notify
        # Told of every operator reply (session, operator, text as written): the learning loop that proposes it as a
        # KB answer (chains/learning.py); None: nobody.
        self.learn: Callable[[str, str, str], Any] | None = None

    # --- reading --------------------------------------------------------------------------------------
    def state(self, session_id: str) -> ConversationState:
        """The conversation's state; one that never changed is with the bot (no row is written for it)."""
        with self.db.session() as session:
            row = session.get(ConversationState, session_id)
        return row if row is not None else ConversationState(session_id=session_id, status=BOT)

    def events(self, session_id: str) -> list[ConversationEvent]:
        with self.db.session() as session:
            return list(session.exec(select(ConversationEvent).where(ConversationEvent.session_id == session_id)
                                     .order_by(col(ConversationEvent.id))).all())

    def queue(self, statuses: Iterable[str] = (WAITING, HUMAN)) -> list[ConversationState]:
        """Conversations waiting for or held by a person, the longest wait first."""
        with self.db.session() as session:
            rows = session.exec(select(ConversationState).where(col(ConversationState.status).in_(list(statuses)))
                                .order_by(col(ConversationState.waiting_since))).all()
        return list(rows)

    def position(self, state: ConversationState) -> int | None:
        """1 for the conversation waiting longest; None unless it waits."""
        if state.status != WAITING or state.waiting_since is None:
            return None
        with self.db.session() as session:
            ahead = session.exec(select(func.count()).select_from(ConversationState)
                                 .where(ConversationState.status == WAITING,
                                        col(ConversationState.waiting_since) < state.waiting_since)).one()
        return int(ahead) + 1

    def operators_online(self) -> int:
        """Operators who used the inbox (console page or agent API) within ``online_window_s``."""
        since = self.clock() - timedelta(seconds=self.online_window_s)
        with self.db.session() as session:
            return int(session.exec(select(func.count()).select_from(OperatorSeen)
                                    .where(col(OperatorSeen.seen_at) >= since)).one())

    def expected_wait_s(self) -> float | None:
        """The median wait of the last claims (queue to a person), within a day; None when there are none."""
        since = self.clock() - WAIT_HORIZON
        with self.db.session() as session:
            claims = session.exec(select(ConversationEvent.detail).where(
                ConversationEvent.to_status == HUMAN, ConversationEvent.from_status == WAITING,
                col(ConversationEvent.created_at) >= since).order_by(col(ConversationEvent.id).desc())
                .limit(WAIT_SAMPLE)).all()
        waits = [float(d["waited_s"]) for d in claims if isinstance(d, dict) and "waited_s" in d]
        return round(statistics.median(waits), 1) if waits else None

    def view(self, state: ConversationState) -> dict[str, Any] | None:
        """What the customer may see of the handoff (None while the bot has it): status, place in the queue, how
        many operators are online, the expected wait, the operator's name once one holds it."""
        if state.status in (BOT, RETURNED):
            return None
        view: dict[str, Any] = {"status": state.status, "trigger": state.trigger,
                                "since": _iso(state.waiting_since)}
        if state.status == WAITING:
            online = self.operators_online()
            view.update(position=self.position(state), operators_online=online,
                        expected_wait_s=self.expected_wait_s(),
                        # the customer's own address, as they are shown it back; asked for while nobody is online
                        contact_email=partly_hidden(state.contact_email or "") or None,
                        asks_for_email=not online and not state.contact_email,
                        reply_within_days=None if online else self.reply_within_days)
        else:
            view.update(operator=state.operator, position=None)
        return view

    def messages(self, session_id: str, after: int = 0, limit: int = 200) -> list[dict[str, Any]]:
        """The conversation as its customer may read it, after message ``after``: customer, assistant and operator
        messages (an operator's as it was sent to the customer), oldest first."""
        with self.db.session() as session:
            rows = session.exec(select(ChatMessage).where(ChatMessage.session_id == session_id,
                                                          col(ChatMessage.id) > after,
                                                          col(ChatMessage.role).in_(list(CUSTOMER_ROLES)))
                                .order_by(col(ChatMessage.id)).limit(limit)).all()
        out = []
        for row in rows:
            item: dict[str, Any] = {"id": row.id, "role": CUSTOMER_ROLES[row.role],
                                    "text": (row.sent or row.content) if row.role == "operator" else row.content,
                                    "created_at": _iso(row.created_at)}
            if row.author:
                item["author"] = row.author
            out.append(item)
        return out

    def seen(self, operator: str) -> None:
        """The operator is at the inbox now (counts as online for ``online_window_s``)."""
        with self.db.session() as session:
            row = session.get(OperatorSeen, operator) or OperatorSeen(name=operator)
            row.seen_at = self.clock()
            session.add(row)
            session.commit()

    # --- changing ---------------------------------------------------------------------------------------
    def set_contact(self, session_id: str, address: str) -> bool:
        """The waiting customer's email address for the reply (validated by the caller, chains/contact.py); stored
        as given, for operators. Whether the conversation still waits (only then is it stored)."""
        with self.db.session() as session:
            row = session.get(ConversationState, session_id)
            if row is None or row.status != WAITING:
                return False
            row.contact_email = address
            session.add(row)
            session.commit()
        return True

    def hand_off(self, session_id: str, trigger: str, reason: str, *, actor: str = "bot", request_id: str = "",
                 user_id: str = "", packet: dict[str, Any] | None = None) -> tuple[ConversationState, bool]:
        """Queue the conversation for a person; (state, whether it changed). A conversation already waiting or held
        stays as it is (the customer asking again changes nothing); a trigger switched off changes nothing."""
        current = self.state(session_id)
        if current.status in (WAITING, HUMAN) or not self.triggers.allows(trigger):
            return current, False
        now = self.clock()
        try:
            state = self._move(session_id, WAITING, actor, trigger=trigger, reason=reason, expect=(BOT, RETURNED),
                               values={"operator": "", "trigger": trigger, "reason": self.scrub(reason)[:2000],
                                       "request_id": request_id, "user_id": user_id, "waiting_since": now,
                                       "claimed_at": None, "packet": packet or {}})
        except IllegalTransition:  # another request queued it meanwhile
            return self.state(session_id), False
        metrics.HANDOFFS.labels(trigger=trigger).inc()
        return state, True

    def claim(self, session_id: str, operator: str) -> ConversationState:
        """The operator takes the conversation: only from the queue, and only one operator ever wins."""
        current = self.state(session_id)
        if current.status == HUMAN and current.operator == operator:
            return current  # a repeated claim (a double click, a retried call) is no change
        if current.status == HUMAN:
            raise Taken(f"{current.operator} holds this conversation", HUMAN, current.operator)
        now = self.clock()
        waited = (now - _aware(current.waiting_since)).total_seconds() if current.waiting_since else None
        state = self._move(session_id, HUMAN, f"operator:{operator}", expect=(WAITING,),
                           values={"operator": operator, "claimed_at": now},
                           detail={"waited_s": round(waited, 3)} if waited is not None else {})
        if waited is not None:
            metrics.PICKUP.observe(waited)
        return state

    def transfer(self, session_id: str, operator: str, to: str) -> ConversationState:
        """The holding operator gives the conversation to another operator."""
        self._holder(session_id, operator)
        return self._move(session_id, HUMAN, f"operator:{operator}", expect=(HUMAN,), holder=operator,
                          values={"operator": to}, detail={"to": to}, reason=f"transferred to {to}")

    def release(self, session_id: str, operator: str, summary: str = "") -> ConversationState:
        """Back to the bot, with the operator's one-line summary kept in the conversation (a note the bot reads)."""
        self._holder(session_id, operator)
        state = self._move(session_id, RETURNED, f"operator:{operator}", expect=(HUMAN,), holder=operator,
                           values={"operator": "", "summary": self.scrub(summary)[:2000]}, reason=summary)
        if summary.strip():
            with self.db.session() as session:
                session.add(ChatMessage(session_id=session_id, role="note", content=self.scrub(summary)[:2000],
                                        author=operator, created_at=self.clock()))
                session.commit()
        return state

    def cancel(self, session_id: str) -> ConversationState:
        """The customer no longer waits: back to the bot."""
        return self._move(session_id, BOT, "customer", expect=(WAITING,), values={"operator": ""},
                          reason="the customer cancelled")

    def reply(self, session_id: str, operator: str, text: str) -> ChatMessage:
        """The holding operator's message to the customer: kept masked as conversation memory (what logs and the
        console show), and as sent for the customer's own chat to deliver."""
        self._holder(session_id, operator)
        state = self.state(session_id)
        row = ChatMessage(session_id=session_id, role="operator", content=self.scrub(text), sent=text,
                          author=operator, created_at=self.clock())
        with self.db.session() as session:
            first = state.waiting_since is not None and session.exec(select(func.count()).select_from(ChatMessage).where(
                ChatMessage.session_id == session_id, ChatMessage.role == "operator",
                col(ChatMessage.created_at) >= state.waiting_since)).one() == 0
            session.add(row)
            session.commit()
            session.refresh(row)
        if first and state.waiting_since is not None:  # the first human reply since the handoff
            metrics.FIRST_REPLY.observe(max(0.0, (_aware(row.created_at) - _aware(state.waiting_since)).total_seconds()))
        if self.learn is not None:
            try:  # a proposed KB answer is a help, never a reason for the reply to fail (chains/learning.py)
                self.learn(session_id, operator, text)
            except Exception:  # noqa: BLE001
                log.exception("proposing a KB answer from the operator's reply failed")
        if self.notify is not None:
            self.notify("message", {"session_id": session_id, "message": {
                "id": row.id, "role": "operator", "text": text, "author": operator, "created_at": _iso(row.created_at)}})
        return row

    def _holder(self, session_id: str, operator: str) -> None:
        current = self.state(session_id)
        if current.status != HUMAN:
            raise IllegalTransition(f"nobody holds this conversation (it is {current.status}); claim it first",
                                    current.status)
        if current.operator != operator:
            raise Taken(f"{current.operator} holds this conversation", HUMAN, current.operator)

    def _move(self, session_id: str, to: str, actor: str, *, expect: tuple[str, ...], values: dict[str, Any],
              trigger: str = "", reason: str = "", detail: dict[str, Any] | None = None,
              holder: str | None = None) -> ConversationState:
        """One change, as a compare-and-set: the row's status (and holder) must still be what was read when the
        UPDATE runs, else nothing is written and the loser learns who won."""
        self._ensure(session_id)
        current = self.state(session_id)
        if current.status not in expect:
            raise (Taken if current.status == HUMAN and to == HUMAN else IllegalTransition)(
                f"a conversation cannot go from {current.status} to {to}", current.status, current.operator)
        action_of(current.status, to)
        now = self.clock()
        table = ConversationState.__table__  # type: ignore[attr-defined]
        condition = [table.c.session_id == session_id, table.c.status == current.status,
                     table.c.version == current.version]
        if holder is not None:
            condition.append(table.c.operator == holder)
        with self.db.session() as session:
            done = session.execute(update(table).where(*condition).values(
                status=to, version=current.version + 1, updated_at=now, **values))
            if done.rowcount != 1:  # type: ignore[attr-defined]  # someone changed it between our read and write
                session.rollback()
                now_state = self.state(session_id)
                kind = Taken if now_state.status == HUMAN else IllegalTransition
                raise kind(f"the conversation changed meanwhile: it is {now_state.status}"
                           + (f", held by {now_state.operator}" if now_state.operator else ""),
                           now_state.status, now_state.operator)
            session.add(ConversationEvent(session_id=session_id, created_at=now, from_status=current.status,
                                          to_status=to, actor=actor, trigger=trigger or values.get("trigger", ""),
                                          reason=self.scrub(reason)[:2000], detail=detail or {}))
            session.commit()
        state = self.state(session_id)
        if self.notify is not None:
            self.notify("handoff", {"session_id": session_id, "from": current.status, "to": to,
                                    "handoff": self.view(state)})
        return state

    def _ensure(self, session_id: str) -> None:
        """The row exists (status bot) before the first compare-and-set."""
        with self.db.session() as session:
            if session.get(ConversationState, session_id) is not None:
                return
            session.add(ConversationState(session_id=session_id, status=BOT, updated_at=self.clock()))
            try:
                session.commit()
            except IntegrityError:  # another request made it first: the same row
                session.rollback()

    def suggest(self, session_id: str, key: str, suggestion: dict[str, Any]) -> bool:
        """Add a suggestion made after the handoff (the LLM's text, written in the background while the customer
        already read the offer of a person) to the packet of a conversation still waiting or held, masked like the
        rest, unsent; it becomes the packet's ``suggestion`` when there was none. Whether it was stored."""
        with self.db.session() as session:
            row = session.get(ConversationState, session_id)
            if row is None or row.status not in (WAITING, HUMAN):
                return False
            packet = dict(row.packet or {})
            packet[key] = _scrubbed({**suggestion, "unsent": True}, self.scrub)
            if not packet.get("suggestion"):
                packet["suggestion"] = packet[key].get("text", "")
            row.packet = packet
            session.add(row)
            session.commit()
        return True

    # --- the inbox --------------------------------------------------------------------------------------
    def inbox(self) -> list[dict[str, Any]]:
        """The queue as operators see it: waiting and held conversations, oldest wait first, each with why the bot
        escalated, its unsent suggestion and its signed customer's id (``customer_id``; None for a guest, whose
        ``user_id`` is only a label)."""
        now = self.clock()
        out = []
        queue = self.queue()
        signed = signed_customers(self.db, (state.session_id for state in queue))
        for state in queue:
            packet = dict(state.packet or {})
            waiting = (now - _aware(state.waiting_since)).total_seconds() if state.waiting_since else 0.0
            out.append({"session_id": state.session_id, "status": state.status, "operator": state.operator,
                        "trigger": state.trigger, "reason": state.reason, "request_id": state.request_id,
                        "user_id": state.user_id, "customer_id": signed.get(state.session_id),
                        "waiting_s": round(waiting, 1),
                        "contact_email": state.contact_email or "",
                        "waiting_since": _iso(state.waiting_since), "claimed_at": _iso(state.claimed_at),
                        "suggestion": packet.get("suggestion", ""), "packet": packet})
        return out

    def customer(self, session_id: str) -> dict[str, Any] | None:
        """The conversation's signed customer and their orders (``{"id", "signed": True, "orders"}``), None for a
        guest: what the console's inbox and the agent API show (storage/customers.py)."""
        return customer_of(self.db, session_id)

    def history(self, session_id: str, limit: int = 200) -> list[dict[str, Any]]:
        """Everything in the conversation for an operator (masked as stored), notes included."""
        with self.db.session() as session:
            rows = session.exec(select(ChatMessage).where(ChatMessage.session_id == session_id)
                                .order_by(col(ChatMessage.id).desc()).limit(limit)).all()
        return [{"id": r.id, "role": CUSTOMER_ROLES.get(r.role, r.role), "text": r.content, "author": r.author,
                 "created_at": _iso(r.created_at)} for r in reversed(rows)]


_LINES = {
    "en": {"waiting": "You are number {position} in line. {online} The expected wait is {wait}.",
           "online": "{n} colleague(s) online.", "nobody": "Nobody from our team is online right now; a colleague will "
           "reply here as soon as one is back.", "unknown": "not known yet", "minutes": "about {m} minute(s)",
           "human": "{operator} from our team has joined the conversation."},
    "zh": {"waiting": "您前面还有{ahead}位客户。{online}预计等待时间：{wait}。", "online": "目前有{n}位同事在线。",
           "nobody": "目前没有同事在线，同事上线后会尽快在这里回复您。", "unknown": "暂无数据", "minutes": "约{m}分钟",
           "human": "{operator}（我们的同事）已加入对话。"},
}


def waiting_line(view: dict[str, Any] | None, language: str = "en") -> str:
    """The honest line a waiting customer reads: their place in the queue, how many operators are online, the
    expected wait from recent pick-up times ("not known yet" without any); with nobody online, a request for an email
    address and when the reply will come (or where it will go, once given); once a person holds it, their name."""
    if not view:
        return ""
    said = _LINES.get(language, _LINES["en"])
    if view.get("status") == HUMAN:
        return said["human"].format(operator=view.get("operator") or "A colleague")
    online = int(view.get("operators_online") or 0)
    wait = view.get("expected_wait_s")
    line = said["waiting"].format(position=view.get("position") or 1, ahead=max(0, (view.get("position") or 1) - 1),
                                  online=said["online"].format(n=online) if online else "",
                                  wait=said["minutes"].format(m=max(1, round(wait / 60))) if wait is not None
                                  else said["unknown"])
    if online:
        return line
    if view.get("reply_within_days"):
        return f"{line} {offline_line(int(view['reply_within_days']), view.get('contact_email') or '', language)}"
    return f"{line} {said['nobody']}"


def packet_from(*, question: str, passages: list[dict[str, Any]], draft: str, rejected: str,
                findings: list[dict[str, Any]], reason: str, request_id: str,
                scrub: Callable[[str], str]) -> dict[str, Any]:
    """The handoff packet an operator reads: why, the KB passages found with their scores, the draft the bot would
    have sent, the LLM text that failed its checks with what the checks found; all unsent suggestions. What came from
    the customer or the LLM is masked like the request log; the help-center draft is the shop's own text, kept as
    written (masked, the shop's support address became "[email]" in the operator's composer and so in the reply).
    ``suggestion`` is the best of them: the help-center draft, else the rejected LLM text."""
    kept = [{k: f.get(k) for k in ("kind", "value", "action", "detail") if k in f} for f in findings
            if isinstance(f, dict)]
    rejected = scrub(rejected)
    return {"unsent": True, "reason": scrub(reason), "request_id": request_id, "question": scrub(question),
            "passages": passages, "draft": draft,
            "rejected": {"text": rejected, "findings": _scrubbed(kept, scrub)}, "suggestion": draft or rejected}


def _scrubbed(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, scrub) for v in value]
    return value


def _aware(moment: datetime | None) -> datetime:
    assert moment is not None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(moment: datetime | None) -> str | None:
    return _aware(moment).isoformat() if moment is not None else None
