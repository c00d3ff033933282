"""The service the apps call: one message in, one answer out, exactly one request row logged.

It owns the long-lived parts (embedder, knowledge base, router, cache, rules, LLM client), the session
memory, and the request log. It never raises for bad input: the guard answers it and the row is written.
A failing database write never fails the customer either: the row waits in a backlog, is retried with the
next write, and the backlog size is reported to operators (`status()`, `/healthz`, the console).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Iterator

from sqlmodel import select

from chains import metrics
from chains.cache import ResponseCache
from chains.ratelimit import RateLimiter
from chains.pii import mask
from chains.router_chain import RouterChain, Turn, timed
from chains.routers.base import active_artifact_path, get_router, reload_routers
from chains.rules import RuleBook
from chains.schema import ChatRequest, ChatResponse
from storage.db import session_scope
from storage.settings_store import live_settings
from storage.tables import ChatMessage, ChatSession, Feedback, Handoff, RequestLog, new_id, utcnow
from tandem.settings import get_settings

CACHEABLE_ROUTES = ("small", "llm")


class TandemService:
    def __init__(self, kb=None, llm=None, router=None, use_llm: bool = True):
        from knowledge.retrieval import get_kb
        from tandem.models import embedder

        settings = get_settings()
        self.settings = settings
        self.kb = kb if kb is not None else get_kb()  # an empty KB is falsy (it has __len__)
        if llm is None and use_llm:
            from chains.llm.client import get_llm_client

            llm = get_llm_client()
        self.cache = ResponseCache(ttl_s=settings.cache_ttl_s)
        router = router if router is not None else get_router()
        self.chain = RouterChain(kb=self.kb, router=router, embed=embedder().encode_one, cache=self.cache,
                                 rules=RuleBook(), llm=llm, max_chars=settings.max_message_chars)
        self.rate_limiter = RateLimiter(settings.rate_limit_per_min)
        self._router_file = self._router_stamp()
        self._router_checked = time.monotonic()
        self._backlog: deque[tuple[RequestLog, list[Any]]] = deque(maxlen=100_000)
        self._log_lock = threading.Lock()
        self.log_failures = 0
        self.last_log_error = ""

    # --- answering ----------------------------------------------------------------------------------
    @staticmethod
    def _router_stamp() -> tuple[str, float]:
        path = active_artifact_path()
        return str(path), path.stat().st_mtime if path.exists() else 0.0

    def _maybe_reload_router(self) -> None:
        """A router promoted in the console (another process) goes live here within seconds, no restart."""
        now = time.monotonic()
        if now - self._router_checked < 5.0:
            return
        self._router_checked = now
        stamp = self._router_stamp()
        if stamp != self._router_file:
            reload_routers()
            self.chain.router = get_router(self.chain.router.name)
            self._router_file = stamp

    def _start(self, request: ChatRequest) -> Turn:
        self._maybe_reload_router()
        if not request.session_id:
            request = request.model_copy(update={"session_id": new_id()})
        turn = Turn(request=request, thresholds=live_settings(), history=self.history(request.session_id))
        # Customers are rate limited; an operator's own CLI and batch runs are not.
        refusal = "" if request.channel in ("cli", "batch") else self.rate_limiter.check(
            f"user:{request.user_id}" if request.user_id else "", f"session:{request.session_id}")
        if refusal:
            turn.note("guard", "refused", reason="rate limited")
            turn.finish("guard", refusal, "guard: rate limited")
        return turn

    def answer(self, request: ChatRequest) -> ChatResponse:
        start = time.perf_counter()
        turn = self._start(request)
        try:
            turn = self.chain.chain.invoke(turn)
        except Exception as exc:  # an internal fault must still answer and be logged
            turn = self._internal_error(turn, exc)
        return self._complete(turn, start)

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        """Text chunks as they are produced, then the final ChatResponse (already logged).

        A customer who presses stop closes this generator; the request is still logged, with what was
        shown so far and the reason.
        """
        start = time.perf_counter()
        turn = self._start(request)
        logged = False
        try:
            try:
                turn = self.chain.decide.invoke(turn)
                if not turn.done and turn.plan != "small":
                    yield from self._stream_llm(turn)
                elif not turn.done:
                    turn = self.chain.small_tier.invoke(turn)
            except Exception as exc:
                turn = self._internal_error(turn, exc)
            if turn.route != "llm":
                yield from _chunks(turn.answer)
            response = self._complete(turn, start)
            logged = True
            yield response
        finally:
            if not logged:
                turn.route = turn.route or ("llm" if turn.plan in ("llm", "rewrite") else "small")
                turn.reasons.append("stopped by the customer before the answer was complete")
                self._complete(turn, start)

    def _stream_llm(self, turn: Turn) -> Iterator[str]:
        from chains.llm.client import LLMResult, LLMUnavailable

        produced: list[str] = []
        try:
            with timed(turn, "generate"):
                for item in self.chain.llm.stream(self.chain.llm_request(turn), score=turn.scores.get("p_llm")):
                    if isinstance(item, LLMResult):
                        self.chain.finish_llm(turn, item)
                    else:
                        produced.append(item)
                        turn.answer = "".join(produced)
                        yield item
        except LLMUnavailable as exc:
            if produced:  # the customer saw a partial answer: say plainly what follows
                yield "\n\n(The connection to our assistant dropped.)\n\n"
            self.chain.fall_back(turn, exc.reason)

    def _internal_error(self, turn: Turn, exc: Exception) -> Turn:
        turn.error = f"{exc.__class__.__name__}: {exc}"[:500]
        turn.note("error", "internal error", error=turn.error)
        draft_text = turn.draft.text if turn.draft else ""
        answer = ("Sorry, something went wrong on our side. " + (f"Here is what our help center says:\n\n"
                  f"{draft_text}" if draft_text else "Please try again, or press \"Talk to a human\"."))
        turn.fallback = True
        return turn.finish("small" if draft_text else "guard", answer, "internal error: fallback answer")

    def _complete(self, turn: Turn, start: float) -> ChatResponse:
        turn.latency_ms["total"] = (time.perf_counter() - start) * 1000
        response = ChatResponse(
            request_id=new_id(), route=turn.route or "guard", answer=turn.answer,
            sources=turn.sources, scores=turn.scores, reasons=turn.reasons,
            latency_ms={k: round(v, 3) for k, v in turn.latency_ms.items()}, degraded=turn.degraded,
            fallback=turn.fallback, trace=turn.trace, session_id=turn.request.session_id)
        if (turn.route in CACHEABLE_ROUTES and not turn.degraded and not turn.fallback and not turn.cache_hit
                and turn.vector is not None and self.chain.cache is not None and turn.query == turn.text):
            self.chain.cache.store(turn.text, turn.vector, turn.cache_key,
                                   {"answer": response.answer, "sources": turn.sources, "origin": turn.route})
        metrics.observe(response, turn)
        self._log(turn, response)
        return response

    # --- logging and sessions ------------------------------------------------------------------------
    def _log(self, turn: Turn, response: ChatResponse) -> None:
        request = turn.request
        scrub = mask if self.settings.mask_pii else (lambda text: text)
        row = RequestLog(
            id=response.request_id, session_id=request.session_id, user_id=request.user_id,
            channel=request.channel, modality=request.modality, text=scrub(turn.text or request.message or "")[:20000],
            answer=scrub(response.answer)[:20000], route=response.route, degraded=turn.degraded,
            fallback=turn.fallback, cache_hit=turn.cache_hit, scores=turn.scores, reasons=turn.reasons,
            trace=_scrub_trace(turn.trace, scrub), latency_ms=response.latency_ms,
            total_ms=response.latency_ms.get("total", 0.0), sources=turn.sources, model=turn.model,
            prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens,
            error="; ".join(filter(None, [turn.error, *request.attachment_errors]))[:2000],
            kb_version=turn.kb_version, settings_version=turn.thresholds.version)
        extra: list[Any] = [
            ChatMessage(session_id=request.session_id, role="user", content=turn.text or request.message or "",
                        request_id=row.id),
            ChatMessage(session_id=request.session_id, role="assistant", content=response.answer, request_id=row.id),
        ]
        with self._log_lock:
            self._backlog.append((row, extra))
            self._flush()

    def _flush(self) -> None:
        while self._backlog:
            row, extra = self._backlog[0]
            try:
                with session_scope() as session:
                    known = session.get(ChatSession, row.session_id)
                    if known is None:
                        session.add(ChatSession(id=row.session_id, user_id=row.user_id))
                    else:
                        known.updated_at = utcnow()
                        session.add(known)
                    # Fresh copies on every try: after a failed commit SQLAlchemy may keep the objects as
                    # "persistent" with a primary key, and re-adding them would then silently insert nothing.
                    session.add(_fresh(row))
                    session.add_all([_fresh(item) for item in extra])
                    session.commit()
            except Exception as exc:  # locked, read-only or full database: keep the row, tell operators
                self.log_failures += 1
                self.last_log_error = f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}"
                metrics.LOG_WRITE_FAILURES.inc()
                return
            self._backlog.popleft()

    def history(self, session_id: str, limit: int = 6) -> list[dict[str, str]]:
        if not session_id:
            return []
        try:
            with session_scope() as session:
                rows = session.exec(select(ChatMessage).where(ChatMessage.session_id == session_id)
                                    .order_by(ChatMessage.id.desc()).limit(limit)).all()
        except Exception:
            return []
        return [{"role": r.role, "content": r.content} for r in reversed(rows)]

    def feedback(self, request_id: str, rating: int, comment: str = "", user_id: str = "") -> None:
        with session_scope() as session:
            session.add(Feedback(request_id=request_id, rating=1 if rating > 0 else -1, comment=comment[:2000],
                                 user_id=user_id))
            session.commit()

    def handoff(self, session_id: str, user_id: str, request_id: str = "", note: str = "") -> int:
        with session_scope() as session:
            row = Handoff(session_id=session_id, user_id=user_id, request_id=request_id, note=note[:2000])
            session.add(row)
            session.commit()
            session.refresh(row)
            return row.id

    def status(self) -> dict[str, Any]:
        return {"kb_version": self.kb.version, "kb_entries": len(self.kb), "cache_entries": len(self.cache),
                "log_backlog": len(self._backlog), "log_failures": self.log_failures,
                "last_log_error": self.last_log_error,
                "llm": self.chain.llm.status() if self.chain.llm is not None else None}


def _fresh(item: Any) -> Any:
    """A new, unattached copy of a row; a message's autoincrement id is left for the database to assign."""
    values = item.model_dump(exclude={"id"} if isinstance(item, ChatMessage) else set())
    return type(item).model_validate(values)


def _scrub_trace(trace: list[dict[str, Any]], scrub) -> list[dict[str, Any]]:
    cleaned = []
    for step in trace:
        detail = {k: scrub(v) if isinstance(v, str) else v for k, v in step.get("detail", {}).items()}
        cleaned.append({**step, "decision": scrub(step.get("decision", "")), "detail": detail})
    return cleaned


def _chunks(text: str, size: int = 24) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start:start + size]


_SERVICE: TandemService | None = None
_SERVICE_LOCK = threading.Lock()


def get_service() -> TandemService:
    global _SERVICE
    with _SERVICE_LOCK:
        if _SERVICE is None:
            _SERVICE = TandemService()
        return _SERVICE


def reset_service() -> None:
    global _SERVICE
    with _SERVICE_LOCK:
        _SERVICE = None
