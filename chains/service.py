"""The service around the chain: one message in, one answer out, exactly one request row logged.

It reads the conversation history (of a session the caller owns), runs the chain's one serving path, and logs;
nothing else. Rate limits are the front ends' (app/access.py): they run before attachments are read. It never
raises for bad input or an internal fault: the guard (or a fallback) answers and the row is written. A failing
database write never fails the customer either: the row waits in a backlog, is retried with the next write, and
the backlog size is reported to operators (`status()`, `/healthz`).

Rows are written by group commit: a request's row is committed before its answer returns, and requests that
finish while another one is writing share the next transaction. Under concurrency most requests then wait for a
commit someone else pays for, instead of each paying its own in turn.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import select

from chains import metrics
from chains.followups import Suggester
from chains.policy import FixedPolicy, LivePolicy
from chains.router_chain import PREPARED_ORIGIN, RouterChain
from chains.rules import LOGGED_ANSWER
from chains.schema import ChatRequest, ChatResponse, Decided, RefusalCode, Revised
from chains.tiers.base import GUARD_ROUTE, LLM_ROUTE, SMALL_ROUTE, TIERS
from chains.turn import Turn
from core.pii import mask
from core.policy import Thresholds
from storage import prepared_store
from storage.db import Database
from storage.tables import ChatMessage, ChatSession, Feedback, Handoff, RequestLog, new_id, utcnow

LOG_BATCH = 256  # rows per transaction at most: a long backlog drains in bounded steps
# Earlier messages a turn reads from its session: 20 turns; the prompt keeps what fits its budget (chains/answers.py).
HISTORY_MESSAGES = 40


@dataclass(slots=True)
class _PendingRow:
    """A request row and its conversation messages, waiting for a commit."""

    row: RequestLog
    extra: list[Any]
    new_session: bool
    owner: str = ""
    written: bool = False
    prepared_hit: tuple[str, str] | None = None  # (namespace, entry key) of a prepared answer the cache served


class TandemService:
    def __init__(self, *, chain: RouterChain, db: Database, policy: LivePolicy | FixedPolicy, mask_pii: bool = True,
                 clock: Callable[[], datetime] = utcnow, followups: Suggester | None = None):
        self.chain = chain
        self.followups = followups  # suggested replies after each answer (TANDEM_FOLLOWUPS); None: none offered
        # Row timestamps come from here: the wall clock, or a simulated one when tests replay hours of traffic.
        self.clock = clock
        self.db = db
        self.policy = policy
        self.scrub: Callable[[str], str] = mask if mask_pii else (lambda text: text)
        self._backlog: deque[_PendingRow] = deque(maxlen=100_000)
        self._queue_lock = threading.Lock()  # guards the backlog itself, held for microseconds
        self._log_lock = threading.Lock()  # one writer at a time; it commits every row waiting
        self.log_failures = 0
        self.last_log_error = ""

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
        try:
            try:
                turn = self._start(turn)
                for item in self.chain.stream(turn):
                    if isinstance(item, Turn):
                        turn = item
                    else:
                        yield item
            except Exception as exc:  # an internal fault must still answer and be logged
                turn = self._internal_error(turn, exc)
                yield turn.answer
            response = self._complete(turn, start)
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

    def _chosen(self, turn: Turn) -> Feedback | None:
        """The customer's answer to a clarification, as feedback on the clarify request it answers (the router's
        label: +1 with the chosen answer, -1 for "something else"); None unless the chain honoured a choice."""
        step = next((s for s in turn.trace if s.get("stage") == "clarify" and str(s.get("decision")).startswith("chose")),
                    None)
        if step is None:
            return None
        request, choice = turn.request, str(step["detail"].get("choice", ""))
        asked = self.last_clarify(request.session_id, request.choice_of)
        if not asked:
            return None
        other = choice == "other"
        return Feedback(request_id=asked, rating=-1 if other else 1, answer_id=choice, chosen_in=turn.request_id,
                        user_id=request.user_id, created_at=self.clock(),
                        comment="clarify: none of the offered answers" if other else f"clarify: chose {choice}")

    def last_clarify(self, session_id: str, request_id: str = "") -> str:
        """The id of the session's latest clarify request, or of ``request_id`` when it is one of the session's
        ("" when none): a choice counts only for a question this conversation was asked."""
        query = select(RequestLog.id).where(RequestLog.session_id == session_id, RequestLog.route == "clarify")
        if request_id:
            query = query.where(RequestLog.id == request_id)
        try:
            with self.db.session() as session:
                found = session.exec(query.order_by(RequestLog.created_at.desc()).limit(1)).first()  # type: ignore[attr-defined]
        except Exception:
            return ""
        return found or ""

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

    def _complete(self, turn: Turn, start: float) -> ChatResponse:
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
            options=turn.options, suggestions=turn.suggestions, served=turn.served)
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
            kb_version=turn.kb_version, settings_version=turn.thresholds.version)
        # Conversation memory is masked like the log: follow-ups need the topic, not the order number.
        sent = scrub(self._sent(turn)) or None if turn.model and turn.text else None
        extra: list[Any] = [
            ChatMessage(session_id=request.session_id, role="user", content=scrub(said), sent=sent, request_id=row.id),
            ChatMessage(session_id=request.session_id, role="assistant", content=stored_answer, request_id=row.id),
        ]
        if turn.handoff:  # the answer check or a handoff rule handed the conversation over: the console's queue
            why = ("answer check: " + ", ".join(f"{f.get('kind', '')} ({str(f.get('value', ''))[:40]})"
                                               for f in findings)) if findings else "; ".join(turn.reasons)
            extra.append(Handoff(session_id=request.session_id, user_id=request.user_id, request_id=row.id,
                                 note=why[:2000]))
        if (chosen := self._chosen(turn)) is not None:
            extra.append(chosen)
        prepared = turn.cache_entry if turn.cache_hit and turn.cache_origin == PREPARED_ORIGIN else None
        pending = _PendingRow(row, extra, turn.new_session, request.owner, prepared_hit=prepared)
        with self._queue_lock:
            self._backlog.append(pending)
        with self._log_lock:
            if not pending.written:  # else the writer before us committed it with its own rows
                self._flush()

    def _flush(self) -> None:
        """Commit the waiting rows, oldest first, a batch per transaction; stop at a failure (they stay)."""
        while True:
            with self._queue_lock:
                batch = list(itertools.islice(self._backlog, LOG_BATCH))
            if not batch or not self._write(batch):
                return
            with self._queue_lock:  # only this writer removes rows, so the committed ones lead the backlog
                for pending in batch:
                    pending.written = True
                while self._backlog and self._backlog[0].written:
                    self._backlog.popleft()

    def _write(self, batch: list[_PendingRow]) -> bool:
        try:
            with self.db.session() as session:
                _open_or_touch_sessions(session, batch)
                # Fresh copies on every try: after a failed commit SQLAlchemy may keep the objects as
                # "persistent" with a primary key, and re-adding them would then silently insert nothing.
                for pending in batch:  # in arrival order: a conversation's messages keep their order
                    session.add(_fresh(pending.row))
                    session.add_all([_fresh(item) for item in pending.extra])
                    if pending.prepared_hit is not None:  # a prepared answer served: its hit counts with the row
                        session.execute(prepared_store.hit_statement(*pending.prepared_hit, pending.row.created_at))
                session.commit()
            return True
        except Exception as exc:  # locked, read-only or full database: keep the rows, tell operators
            self.log_failures += 1
            self.last_log_error = f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}"
            metrics.LOG_WRITE_FAILURES.inc()
            return False

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
        return [{"role": r.role, "content": r.content, **({"sent": r.sent} if r.sent else {})} for r in reversed(rows)]

    def feedback(self, request_id: str, rating: int, comment: str = "", user_id: str = "") -> None:
        with self.db.session() as session:
            session.add(Feedback(request_id=request_id, rating=1 if rating > 0 else -1, created_at=self.clock(),
                                 comment=self.scrub(comment)[:2000], user_id=user_id))
            session.commit()

    def request_exists(self, request_id: str) -> bool:
        with self.db.session() as session:
            return session.get(RequestLog, request_id) is not None

    def handoff(self, session_id: str, user_id: str, request_id: str = "", note: str = "") -> int:
        with self.db.session() as session:
            row = Handoff(session_id=session_id, user_id=user_id, request_id=request_id,
                          note=self.scrub(note)[:2000])
            session.add(row)
            session.commit()
            session.refresh(row)
            return int(row.id or 0)

    def status(self) -> dict[str, Any]:
        return {"log_backlog": len(self._backlog), "log_failures": self.log_failures,
                "last_log_error": self.last_log_error}


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


def _open_or_touch_sessions(session: Any, batch: list[_PendingRow]) -> None:
    """One ChatSession row per conversation in the batch: created for a new one, its ``updated_at`` moved on for
    a known one. A session minted for its first request has no row yet, so it is not looked up."""
    first: dict[str, _PendingRow] = {}
    for pending in batch:
        first.setdefault(pending.row.session_id, pending)
    for session_id, opener in first.items():
        known = None if opener.new_session else session.get(ChatSession, session_id)
        if known is None:
            session.add(ChatSession(id=session_id, user_id=opener.row.user_id, owner=opener.owner))
        else:
            known.updated_at = utcnow()
            session.add(known)


def _fresh(item: Any) -> Any:
    """A new, unattached copy of a row; a message's autoincrement id is left for the database to assign."""
    values = item.model_dump(exclude={"id"} if isinstance(item, (ChatMessage, Handoff)) else set())
    return type(item).model_validate(values)


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
