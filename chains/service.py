"""The service around the chain: one message in, one answer out, exactly one request row logged.

It reads the conversation history (of a session the caller owns), asks who holds the conversation
(chains/conversation.py: while a person does, the bot sends nothing and the message is only logged), runs the
chain's one serving path, queues the conversation for a person when a handoff trigger says so, and logs; nothing
else. Rate limits are the front ends' (app/access.py): they run before attachments are read. It never
raises for bad input or an internal fault: the guard (or a fallback) answers and the row is written. A failing
database write never fails the customer either: the row waits in a backlog, is retried with the next write, and
the backlog size is reported to operators (`status()`, `/healthz`).

Rows are written by group commit (chains/request_log.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from sqlmodel import select

from chains import answers, metrics
from chains.background import answer_in_background, settled_before_the_llm
from chains.contact import acknowledgement, address_in, not_an_address, partly_hidden, reply_language
from chains.conversation import (
    ANSWER_CHECK,
    ASKED,
    BUTTON,
    HUMAN,
    REPEAT,
    VIP,
    WAITING,
    Conversations,
    packet_from,
    repeated,
    rule_trigger,
    waiting_line,
)
from chains.followups import Suggester
from chains.forecast import predicted_reason
from chains.policy import FixedPolicy, LivePolicy
from chains.request_log import PendingRow, RequestLogWriter
from chains.router_chain import PREPARED_ORIGIN, RouterChain
from chains.rules import LOGGED_ANSWER
from chains.schema import HANDOFF_ROUTE, HUMAN_ROUTE, ChatRequest, ChatResponse, Decided, RefusalCode, Revised
from chains.tiers.base import GUARD_ROUTE, LLM_ROUTE, SMALL_ROUTE, TIERS
from chains.turn import Turn
from core.pii import mask
from core.policy import Thresholds
from storage.db import Database
from storage.tables import ChatMessage, ChatSession, ConversationState, Feedback, Handoff, RequestLog, new_id, utcnow

# Earlier messages a turn reads from its session: 20 turns; the prompt keeps what fits its budget (chains/answers.py).
HISTORY_MESSAGES = 40
# Where a customer writes: only there may a turn queue the conversation for a person (not the operator's CLI, batch
# runs, or the idle-time worker's own requests).
CUSTOMER_CHANNELS = ("api", "ui", "openai")


class TandemService:
    def __init__(self, *, chain: RouterChain, db: Database, policy: LivePolicy | FixedPolicy, mask_pii: bool = True,
                 clock: Callable[[], datetime] = utcnow, followups: Suggester | None = None,
                 conversations: Conversations | None = None, vip_users: frozenset[str] = frozenset()):
        self.chain = chain
        # Who holds each conversation (chains/conversation.py); None: the bot always answers (batch runs, tools).
        self.conversations = conversations
        self.vip_users = vip_users  # customers the VIP handoff trigger serves (TANDEM_VIP_USERS)
        self.followups = followups  # suggested replies after each answer (TANDEM_FOLLOWUPS); None: none offered
        # Row timestamps come from here: the wall clock, or a simulated one when tests replay hours of traffic.
        self.clock = clock
        self.db = db
        self.policy = policy
        self.scrub: Callable[[str], str] = mask if mask_pii else (lambda text: text)
        self.log_writer = RequestLogWriter(db)  # group commit, with a backlog while the database fails

    # --- answering ----------------------------------------------------------------------------------
    def answer(self, request: ChatRequest) -> ChatResponse:
        response = None
        for item in self.stream(request):
            if isinstance(item, ChatResponse):
                response = item
        assert response is not None  # stream() always ends with the logged response
        return response

    def stream(self, request: ChatRequest,
               cancel: threading.Event | None = None) -> Iterator[str | Decided | Revised | ChatResponse]:
        """The route once decided, text pieces as they are produced, then the final ChatResponse (already logged).

        ``cancel`` (optional) stops an LLM answer midway (the Stop button). A consumer that closes this
        generator (a client that went away) cancels it too. Either way the request is logged, with what was
        produced so far, as cancelled.
        """
        start = time.perf_counter()
        turn = self._blank_turn(request, cancel)
        logged = False
        handoff: dict[str, Any] | None = None
        try:
            try:
                turn = self._start(turn)
                state = self._state_at_start(turn)
                if self._held(turn, state):  # a person holds the conversation: the bot sends nothing
                    yield turn.decided(HUMAN_ROUTE)
                    if turn.answer:  # the guard refused the message (empty, too long)
                        yield turn.answer
                elif self._contact_given(turn, state):  # a waiting customer's email address for the reply
                    yield turn.decided(HANDOFF_ROUTE)
                    yield turn.answer
                else:
                    for item in self.chain.stream(turn):
                        if isinstance(item, Turn):
                            turn = item
                        else:
                            yield item
                    if (revised := self._escalate(turn)) is not None:
                        yield revised
                handoff = self._handoff_view(turn)
            except Exception as exc:  # an internal fault must still answer and be logged
                turn = self._internal_error(turn, exc)
                yield turn.answer
            response = self._complete(turn, start, handoff)
            logged = True
            yield response
        finally:
            if not logged:  # the consumer went away before the end
                turn.cancel.set()
                turn.cancelled = True
                turn.route = turn.route or (LLM_ROUTE if turn.plan in TIERS[LLM_ROUTE].plans else SMALL_ROUTE)
                turn.reasons.append("cancelled: the client stopped reading before the answer was complete")
                self._complete(turn, start)

    def log_refusal(self, request: ChatRequest, reason: str) -> str:
        """Log a call that a front end refused before the chain (wrong token, unknown model): one guard row."""
        return self.refuse(request, reason, reason).request_id

    def refuse(self, request: ChatRequest, answer: str, reason: str, code: RefusalCode = "") -> ChatResponse:
        """Answer ``answer`` without running the chain (a rate limit, a bad key), and log the row. ``code`` is the
        refusal's machine-readable code (ChatResponse.refusal) where a front end answers by it."""
        turn = self._blank_turn(request, None)
        turn.note("guard", "refused", reason=reason)
        turn.finish("guard", answer, reason, code)
        return self._complete(turn, time.perf_counter())

    def _blank_turn(self, request: ChatRequest, cancel: threading.Event | None) -> Turn:
        minted = not request.session_id
        if minted:
            request = request.model_copy(update={"session_id": new_id()})
        # a placeholder until _start reads the live policy (a refusal before it logs the released one)
        turn = Turn(request=request, thresholds=Thresholds.shipped(), new_session=minted)
        if cancel is not None:
            turn.cancel = cancel
        return turn

    def _start(self, turn: Turn) -> Turn:
        """Live policy, session ownership and history; inside the try, so a broken policy still logs a row."""
        request = turn.request
        turn.thresholds = self.policy.current()
        if not turn.new_session and not self.owns(request.session_id, request.owner):
            # Another caller's session id: this caller gets a conversation of its own, and reads nothing of theirs.
            turn.request = request = request.model_copy(update={"session_id": new_id()})
            turn.new_session = True
            turn.note("session", "new session", reason="the session id belongs to another caller")
        if request.history is not None:  # an OpenAI client writes the history: the stored one says what was sent
            turn.history = with_sent(request.history, [] if turn.new_session else self.history(request.session_id))
        elif not turn.new_session:  # a session minted for this request has nothing to read
            turn.history = self.history(request.session_id)
        return turn

    def owns(self, session_id: str, owner: str) -> bool:
        """Whether ``owner`` may continue this session: it opened it, or nobody has (a new id it chose). The operator's
        own channels (CLI, batch: owner "") may continue any session, as they read the database anyway; a session
        they opened belongs to no caller of the APIs or the UI."""
        if not owner:
            return True
        try:
            with self.db.session() as session:
                row = session.get(ChatSession, session_id)
        except Exception:  # an unreadable database reads no history either; the turn goes on
            return True
        return row is None or row.owner == owner

    def _internal_error(self, turn: Turn, exc: Exception) -> Turn:
        turn.error = f"{exc.__class__.__name__}: {exc}"[:500]
        turn.note("error", "internal error", error=turn.error)
        draft_text = turn.draft.text if turn.draft else ""
        answer = ("Sorry, something went wrong on our side. " + (f"Here is what our help center says:\n\n"
                  f"{draft_text}" if draft_text else "Please try again, or press \"Talk to a human\"."))
        turn.fallback = True
        return turn.finish(SMALL_ROUTE if draft_text else GUARD_ROUTE, answer, "internal error: fallback answer")

    def _complete(self, turn: Turn, start: float, handoff: dict[str, Any] | None = None) -> ChatResponse:
        if self.followups is not None:
            self.followups.offer(turn)
        turn.latency_ms["total"] = (time.perf_counter() - start) * 1000
        response = ChatResponse(
            request_id=turn.request_id, route=turn.route or "guard", answer=turn.answer,
            sources=turn.sources, scores=turn.scores, reasons=turn.reasons,
            latency_ms={k: round(v, 3) for k, v in turn.latency_ms.items()}, degraded=turn.degraded,
            fallback=turn.fallback, cancelled=turn.cancelled, trace=turn.trace,
            session_id=turn.request.session_id, model=turn.model, prompt_tokens=turn.prompt_tokens,
            completion_tokens=turn.completion_tokens, finish_reason=turn.finish_reason, refusal=turn.refusal,
            suggestions=turn.suggestions, served=turn.served, handoff=handoff, products=turn.products,
            filters=turn.filters, intent=turn.intent)
        metrics.observe(response, turn)
        self._log(turn, response)
        return response

    # --- logging and sessions ------------------------------------------------------------------------
    def _log(self, turn: Turn, response: ChatResponse) -> None:
        """Everything written here passes ``scrub`` (the PII mask unless TANDEM_MASK_PII=false): the texts, the
        error, the reasons, and every string nested anywhere in ``findings`` and ``trace``."""
        request = turn.request
        scrub = self.scrub
        said = turn.text or request.message or ""
        answer = response.answer
        if response.route == "tool" and scrub is mask:
            # An order-tool answer is the customer's own order: number, items, tracking number. The customer reads
            # it in full (``response.answer`` is untouched); the request row, the conversation memory and the trace
            # keep the copy the tool wrote with those as placeholders ("Order [order] ([items]) is **shipped**. It
            # travels with DHL, tracking number [tracking]."), masked once more in case a tool put more in it. A
            # tool without such a copy is stored through the PII mask like any answer.
            answer = next((step["detail"][LOGGED_ANSWER] for step in turn.trace if step.get("stage") == "tool"
                           and isinstance(step.get("detail", {}).get(LOGGED_ANSWER), str)), answer)
        elif response.route == HANDOFF_ROUTE and scrub is mask:
            # The acknowledgement of an email address shows it partly hidden (j***@example.com), which the PII mask
            # would not recognise: its logged copy names it [email] (_contact_given).
            answer = next((step["detail"][LOGGED_ANSWER] for step in turn.trace if step.get("stage") == "contact"
                           and isinstance(step.get("detail", {}).get(LOGGED_ANSWER), str)), answer)
        stored_answer = scrub(answer)
        findings = _scrub_trace(turn.findings, scrub)
        row = RequestLog(
            id=response.request_id, created_at=self.clock(), session_id=request.session_id, user_id=request.user_id,
            channel=request.channel, modality=request.modality, text=scrub(said)[:20000],
            answer=stored_answer[:20000], route=response.route, degraded=turn.degraded,
            fallback=turn.fallback, cache_hit=turn.cache_hit, cancelled=turn.cancelled, findings=findings,
            served=turn.served, rejected_text=scrub(turn.rejected_text)[:20000], scores=turn.scores,
            reasons=_scrub_trace(turn.reasons, scrub), trace=_scrub_trace(turn.trace, scrub),
            latency_ms=response.latency_ms, total_ms=response.latency_ms.get("total", 0.0), sources=turn.sources,
            model=turn.model, prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens,
            error=scrub("; ".join(filter(None, [turn.error, *request.attachment_errors])))[:2000],
            kb_version=turn.kb_version, settings_version=turn.thresholds.version, intent=turn.intent)
        # Conversation memory is masked like the log: follow-ups need the topic, not the order number.
        sent = scrub(self._sent(turn)) or None if turn.model and turn.text else None
        extra: list[Any] = [
            ChatMessage(session_id=request.session_id, role="user", content=scrub(said), sent=sent, request_id=row.id)]
        if response.route != HUMAN_ROUTE:  # a person holds the conversation: the bot said nothing
            extra.append(ChatMessage(session_id=request.session_id, role="assistant", content=stored_answer,
                                     request_id=row.id))
        if turn.handoff:  # the answer check or a handoff rule handed the conversation over: the console's queue
            why = ("answer check: " + ", ".join(f"{f.get('kind', '')} ({str(f.get('value', ''))[:40]})"
                                               for f in findings)) if findings else "; ".join(turn.reasons)
            extra.append(Handoff(session_id=request.session_id, user_id=request.user_id, request_id=row.id,
                                 note=why[:2000]))
        prepared = turn.cache_entry if turn.cache_hit and turn.cache_origin == PREPARED_ORIGIN else None
        self.log_writer.add(PendingRow(row, extra, turn.new_session, request.owner, prepared_hit=prepared))

    def _sent(self, turn: Turn) -> str:
        """What the LLM got as this turn's message (the chain's own prompt), for the next turns' prompts to repeat;
        "" if it cannot be rebuilt (the row is logged all the same, and the next prompt repeats the message alone)."""
        try:
            return self.chain.llm_request(turn)[-1]["content"]
        except Exception:  # noqa: BLE001  (logging must not fail on a prompt it only keeps for later)
            return ""

    def history(self, session_id: str, limit: int = HISTORY_MESSAGES) -> list[dict[str, str]]:
        """The session's last ``limit`` messages, oldest first; a user message the LLM answered carries ``sent``
        (the message as the LLM got it). The prompt keeps what fits its budget (chains/answers.py conversation)."""
        if not session_id:
            return []
        try:
            with self.db.session() as session:
                rows = session.exec(select(ChatMessage).where(ChatMessage.session_id == session_id)
                                    .order_by(ChatMessage.id.desc()).limit(limit)).all()  # type: ignore[union-attr]
        except Exception:
            return []
        return [_remembered(r) for r in reversed(rows)]

    def feedback(self, request_id: str, rating: int, comment: str = "", user_id: str = "") -> None:
        with self.db.session() as session:
            session.add(Feedback(request_id=request_id, rating=1 if rating > 0 else -1, created_at=self.clock(),
                                 comment=self.scrub(comment)[:2000], user_id=user_id))
            session.commit()

    def request_exists(self, request_id: str) -> bool:
        with self.db.session() as session:
            return session.get(RequestLog, request_id) is not None

    def handoff(self, session_id: str, user_id: str, request_id: str = "", note: str = "") -> int:
        """The "Talk to a human" button: a ticket in the console's handoff list, and the conversation queued for a
        person (when TANDEM_HANDOFF_ON_BUTTON allows)."""
        with self.db.session() as session:
            row = Handoff(session_id=session_id, user_id=user_id, request_id=request_id,
                          note=self.scrub(note)[:2000])
            session.add(row)
            session.commit()
            session.refresh(row)
            ticket = int(row.id or 0)
        if self.conversations is not None:
            reason = "the customer pressed \"Talk to a human\"" + (f": {note.strip()}" if note.strip() else "")
            logged = self._last_request(session_id, request_id)
            question = logged.text if logged is not None else note
            passages, draft = self._kb_suggestion(question, [], None)
            packet = packet_from(question=question, passages=passages, draft=draft,
                                 rejected=logged.rejected_text if logged is not None else "",
                                 findings=list(logged.findings or []) if logged is not None else [], reason=reason,
                                 request_id=logged.id if logged is not None else "", scrub=self.scrub)
            self.conversations.hand_off(session_id, BUTTON, reason, actor="customer", user_id=user_id,
                                        request_id=logged.id if logged is not None else "", packet=packet)
        return ticket

    def handoff_view(self, session_id: str) -> dict[str, Any] | None:
        """What the customer may see of the conversation's handoff now (None while the bot has it)."""
        if self.conversations is None or not session_id:
            return None
        return self.conversations.view(self.conversations.state(session_id))

    # --- a person in the conversation ------------------------------------------------------------------
    def _state_at_start(self, turn: Turn) -> ConversationState | None:
        """Where the conversation stands as the message arrives (one read for the checks that follow); None for a
        conversation minted now, or without the handoff core."""
        if self.conversations is None or turn.new_session:
            return None
        return self.conversations.state(turn.request.session_id)

    def _held(self, turn: Turn, state: ConversationState | None) -> bool:
        """Whether a person holds the conversation. Then the message is checked by the guard (a refusal answers as
        always) and logged for the operator, and the bot answers nothing (route human, empty answer)."""
        if state is None or state.status != HUMAN:
            return False
        turn = self.chain.check_message(turn)
        if turn.done:
            return True
        turn.served = HUMAN_ROUTE
        turn.note("conversation", "held by a person", operator=state.operator)
        turn.finish(HUMAN_ROUTE, "", f"a person holds the conversation ({state.operator}): the bot stays quiet")
        return True

    def _contact_given(self, turn: Turn, state: ConversationState | None) -> bool:
        """A customer waiting for a person who sends an email address (chains/contact.py): a valid one is stored on
        the conversation for the operators and acknowledged, partly hidden; one that fails the check is answered
        with a request to send it again. Either way the message is logged (masked) and shown to operators, and the
        chain does not run: an address is no question."""
        conversations = self.conversations
        if (conversations is None or state is None or state.status != WAITING
                or turn.request.channel not in CUSTOMER_CHANNELS
                or (given := address_in(turn.request.message or "")) is None):
            return False
        turn = self.chain.check_message(turn)
        if turn.done:  # the guard refused it
            return True
        days, turn.language = conversations.reply_within_days, reply_language(turn.text, turn.history)
        if given.valid and conversations.set_contact(turn.request.session_id, given.address):
            answer = acknowledgement(given.address, days, turn.language)
            turn.served = "contact_email"
            turn.note("contact", "email address taken",
                      **{LOGGED_ANSWER: answer.replace(partly_hidden(given.address), "[email]")})
            turn.finish(HANDOFF_ROUTE, answer, "handoff: the waiting customer left an email address for the reply")
        else:
            turn.served = "contact_invalid"
            turn.note("contact", "not a valid email address: asked again")
            turn.finish(HANDOFF_ROUTE, not_an_address(turn.language),
                        "handoff: what the waiting customer sent as an email address failed the check")
        return True

    def _trigger(self, turn: Turn) -> tuple[str, str]:
        """(trigger, reason) of a handoff this turn asks for, the first whose setting allows it; ("", "") for none."""
        findings = ", ".join(f"{f.get('kind', '')} ({str(f.get('value', ''))[:40]})" for f in turn.findings)
        candidates: list[tuple[str, str]] = []
        if turn.escalation is not None:  # a tier asked for a person itself (a product photo that found nothing)
            candidates.append(turn.escalation[:2])
        if turn.handoff and turn.route == HANDOFF_ROUTE and turn.rule is not None:
            candidates.append(rule_trigger(turn.rule))  # as message_trigger decides (chains/conversation.py)
        elif turn.handoff:
            candidates.append((ANSWER_CHECK, f"the answer check hands off: {findings}"))
        elif turn.served == "human_offer" and (predicted := predicted_reason(turn.scores)):
            candidates.append((ANSWER_CHECK, predicted))
        elif turn.served == "human_offer":
            candidates.append((ANSWER_CHECK, "the assistant's answer failed its checks" +
                               (f": {findings}" if findings else " (a remembered replacement)" if turn.cache_hit else "")))
        if said := repeated(turn.text, turn.history, turn.rule):
            candidates.append((REPEAT, said))
        failed = turn.served in ("draft_with_caveat", "human_offer") or turn.fallback
        if failed and turn.request.customer and turn.request.customer in self.vip_users:
            candidates.append((VIP, "a VIP customer's answer " + ("fell back" if turn.fallback else
                                                                 "failed its checks")))
        assert self.conversations is not None
        return next((c for c in candidates if self.conversations.triggers.allows(c[0])), ("", ""))

    def _escalate(self, turn: Turn) -> Revised | None:
        """Queue the conversation for a person when a trigger says so. An answer that would have offered a person
        ("press Talk to a human") says instead that a colleague will reply here: returned as the Revised text."""
        if (self.conversations is None or turn.cancelled or turn.route in (GUARD_ROUTE, HUMAN_ROUTE)
                or turn.request.channel not in CUSTOMER_CHANNELS):
            return None
        trigger, reason = self._trigger(turn)
        if not trigger:
            return None
        passages, draft = self._kb_suggestion(turn.text, list(turn.hits), turn.draft)
        packet = packet_from(question=turn.text, passages=passages, draft=draft, rejected=turn.rejected_text,
                             findings=turn.findings, reason=reason, request_id=turn.request_id, scrub=self.scrub)
        request = turn.request
        if request.photos:  # what the customer sent: the operator sees the photo and what was read from it
            packet["photos"] = [photo.for_operator(self.scrub) for photo in request.photos]
        state, changed = self.conversations.hand_off(request.session_id, trigger, reason,
                                                     actor="customer" if trigger == ASKED else "bot",
                                                     request_id=turn.request_id, user_id=request.user_id, packet=packet)
        turn.note("handoff", trigger if changed else f"{trigger} (already {state.status})", reason=reason)
        if state.status != WAITING:
            return None
        turn.handoff = True  # the console's handoff list gets its ticket too (_log)
        if changed and settled_before_the_llm(turn):  # the customer did not wait for the LLM: the operator gets it
            answer_in_background(self.chain, self.conversations, turn, self._background_failed)
        if turn.escalation is not None and trigger == turn.escalation[0] and turn.escalation[2]:
            turn.answer = f"{turn.answer}\n\n{turn.escalation[2]}"  # the honest line stays; a person is on the way
            turn.reasons.append(f"handoff: {trigger}: {reason}")
            return Revised(text=turn.answer)
        if (turn.served in ("human_offer", "draft_with_caveat") and trigger in (ANSWER_CHECK, VIP)) or trigger == REPEAT:
            turn.answer = answers.notices_for(self.chain.brand)[turn.language].handoff
            turn.reasons.append(f"handoff: {trigger}: a colleague replies instead of the offer")
            return Revised(text=turn.answer)
        return None

    def _background_failed(self, why: str) -> None:
        self.log_writer.last_error = why  # shown with the log's health (status(), /healthz): the handoff stands

    def _handoff_view(self, turn: Turn) -> dict[str, Any] | None:
        if (self.conversations is None or turn.request.channel not in CUSTOMER_CHANNELS
                or (turn.new_session and not turn.handoff)):  # a conversation minted now has no state, unless queued now
            return None
        view = self.conversations.view(self.conversations.state(turn.request.session_id))
        if view is not None:
            view["triggered"] = bool(turn.handoff) and turn.route != HUMAN_ROUTE
            view["line"] = waiting_line(view, turn.language)  # what a front end shows under the answer
        return view

    def _kb_suggestion(self, question: str, hits: list[Any], draft: Any) -> tuple[list[dict[str, Any]], str]:
        """The KB passages (with their scores) and the draft an operator may send: the turn's own, else a search of
        the question (a rule handed it over before any retrieval)."""
        if not hits and question.strip():
            try:
                hits = list(self.chain.kb.search(question, k=self.chain.top_k))
            except Exception:  # a suggestion is a help, not a duty: the handoff goes on without one
                hits = []
            draft = None
        passages = [{"answer_id": h.answer_id, "title": h.title, "score": round(float(h.score), 4),
                     "text": h.answer[:2000]} for h in hits]
        if draft is None and hits:
            draft = answers.draft_answer(question, hits, self.chain.brand)
        return passages, (draft.text if draft is not None and hits else "")

    def _last_request(self, session_id: str, request_id: str = "") -> RequestLog | None:
        query = select(RequestLog).where(RequestLog.session_id == session_id)
        if request_id:
            query = query.where(RequestLog.id == request_id)
        with self.db.session() as session:
            return session.exec(query.order_by(RequestLog.created_at.desc()).limit(1)).first()  # type: ignore[attr-defined]

    def status(self) -> dict[str, Any]:
        return self.log_writer.status()


def _remembered(row: ChatMessage) -> dict[str, str]:
    """A stored message as the chain reads it: an operator's reply is what the customer was told (an assistant turn,
    masked as stored); an operator's hand-back note is context the bot keeps."""
    if row.role == "operator":
        return {"role": "assistant", "content": row.content}
    if row.role == "note":
        return {"role": "assistant", "content": f"(Our colleague {row.author or ''} handed this conversation back to "
                                                f"me with a note: {row.content})"}
    return {"role": row.role, "content": row.content, **({"sent": row.sent} if row.sent else {})}


def with_sent(history: list[dict[str, str]], stored: list[dict[str, str]]) -> list[dict[str, str]]:
    """A client's history (an OpenAI client writes it) with each user message the session stored as sent to the LLM
    marked so (``sent``): the same customer text, matched by content. Texts the client changed match nothing and
    go to the prompt as the client wrote them."""
    sent = {t["content"]: t["sent"] for t in stored if t.get("role") == "user" and t.get("sent")}
    out = []
    for t in history:  # a client's own "sent" is dropped: only the service says what the LLM got
        turn = {k: v for k, v in t.items() if k != "sent"}
        if turn.get("role") == "user" and turn.get("content") in sent:
            turn["sent"] = sent[turn["content"]]
        out.append(turn)
    return out


def _scrub_trace(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` (a trace, findings, reasons: any JSON-like value) with every string in it scrubbed, however deeply
    nested in lists and dicts; keys, numbers and booleans are kept."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {key: _scrub_trace(item, scrub) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub_trace(item, scrub) for item in value]
    return value
