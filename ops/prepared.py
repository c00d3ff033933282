"""LLM answers prepared while the engine is idle (issue 42, part 2): the idle-time worker.

Every ``every_s`` seconds, when the LLM engine is idle (the LLM client's own calls: none in flight or queued; and,
where the load poller has fresh vLLM metrics, nothing running or waiting in the engine from anyone else), it takes
the recurring LLM-bound group (ops/recurring.py) most likely to be asked next by the conversations going on now
(ops/predicted.py: predicted follow-ups), else the largest, that

- is not personal (no order number, email, phone, tracking number or name in any member; the cache's own PII rule
  refuses personal text besides),
- has no fresh answer in the shared response cache under the key a live routed message would be looked up under now
  (which carries the KB version, the thresholds, the router and the rules; a remembered replacement of a failed
  LLM answer, origin ``replaced``, is no answer), and
- was neither deleted by an operator under this KB version nor tried in the last hour,

and asks the chain for the group's representative question through the service, as a live message goes: guard,
cache, routing, load gate, the LLM tier with its answer check or rewrite verification, and one logged request row
(channel ``prepare``). The chain stores the answer in the shared cache, with payload origin ``prepared``, only when
it is LLM text that passed its checks (served ``llm`` or ``rewrite``, no findings, not a fallback, not cancelled);
the worker then records it (storage/prepared_store.py), so hits are counted and an operator can delete it.

It yields to live traffic: its LLM call asks vLLM for the lowest priority (:data:`PRIORITY`; a server that refuses
priorities gets none), a watcher cancels the call as soon as another LLM call starts or queues in this process or the
engine reports another request (the LLM tier aborts at the next token), and it spends at most ``tokens_per_hour``
(prompt and completion tokens of its own logged requests over the last hour; one request may overshoot by its own
size). ``tokens_per_hour`` 0 turns it off. One request per pass at most; a lease row keeps it to one replica.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from chains.cache import ResponseCache, normalise
from chains.router_chain import PREPARED_ORIGIN, REPLACED_ORIGIN
from chains.schema import LLM_ROUTE, PREPARE_CHANNEL, ChatRequest, ChatResponse
from chains.service import TandemService
from ops.job import PeriodicThread, holder_id, take_lease
from ops.predicted import FollowupIndex, active_states, follow_up_index, predicted_first
from ops.recurring import RecurringGroup, recurring_questions
from storage import prepared_store
from storage.db import Database
from storage.tables import PreparedAnswer, RequestLog, table_of, utcnow

log = logging.getLogger(__name__)

PRIORITY = 100          # vLLM priority of a prepare call: lower is served sooner; live calls are 0, VIPs -10
USER = "tandem-prepare"  # the user id its requests are logged under
LEASE = "prepare"
WINDOW = timedelta(days=1)  # the request log read for recurring groups
TOP = 20                # groups considered per regrouping, largest first
REGROUP_S = 600.0       # groups are recomputed at most this often (embedding the log is the pass's main cost)
RETRY_AFTER_S = 3600.0  # a question whose attempt stored nothing is not tried again for an hour
WATCH_S = 0.05          # how often the watcher reads the LLM client's load during a prepare call
VLLM_FRESH_S = 5.0      # engine metrics older than this say nothing about now


@dataclass
class PrepareReport:
    """What one pass did. ``outcome``: off, lease (another replica prepares), budget (spent for this hour), busy
    (the engine is not idle), nothing (no group needs an answer), prepared, rejected (the LLM text failed its checks,
    or the chain kept the message off the LLM), cancelled (live traffic arrived)."""

    outcome: str
    question: str = ""
    request_id: str = ""
    tokens: int = 0
    spent: int = 0                  # tokens spent in the hour before this pass
    skipped_personal: int = 0       # personal groups passed over
    note: str = ""
    predicted: float = 0.0          # how likely the conversations going on now ask it next (ops/predicted.py)
    prepared: PreparedAnswer | None = None
    response: ChatResponse | None = field(default=None, repr=False)


def tokens_spent(db: Database, since: datetime) -> int:
    """Prompt and completion tokens of the worker's logged requests since ``since``."""
    t = table_of(RequestLog)
    query = (select(func.coalesce(func.sum(t.c.prompt_tokens + t.c.completion_tokens), 0))
             .where(t.c.channel == PREPARE_CHANNEL, t.c.created_at >= since))
    with db.engine.connect() as conn:
        return int(conn.execute(query).scalar() or 0)


def engine_busy(status: dict[str, Any], own: int = 0) -> str:
    """Why the LLM engine is not idle ("" when it is), from the LLM client's status: calls in flight or queued in
    this process beyond the worker's ``own``, or requests running (beyond ``own``) or waiting in vLLM itself."""
    in_flight, queued = int(status.get("in_flight", 0)), int(status.get("queued", 0))
    if queued or in_flight > own:
        return f"{in_flight} LLM call(s) in flight and {queued} queued in this process"
    engine = status.get("vllm") or {}
    if engine.get("available") and float(engine.get("age_s") or 0.0) <= VLLM_FRESH_S:
        running, waiting = engine.get("running") or 0, engine.get("waiting") or 0
        if waiting or running > own:
            return f"vLLM runs {running:g} and queues {waiting:g} request(s)"
    return ""


@dataclass
class _Candidate:
    group: RecurringGroup
    request: ChatRequest
    namespace: str
    predicted: float = 0.0


class PreparedWorker(PeriodicThread):
    """One pass at a time (:meth:`run_once`), or a daemon thread every ``every_s`` seconds (:meth:`start`)."""

    thread_name = "tandem-prepare"

    def __init__(self, service: TandemService, tokens_per_hour: int, *, every_s: float = 60.0,
                 window: timedelta = WINDOW, top: int = TOP, clock: Callable[[], datetime] = utcnow):
        super().__init__(every_s)
        self.service, self.chain, self.db = service, service.chain, service.db
        self.tokens_per_hour, self.every_s, self.window, self.top = tokens_per_hour, every_s, window, top
        self.clock = clock
        self.holder = f"{holder_id()}:prepare"
        self._groups: list[RecurringGroup] = []
        self._followups = FollowupIndex()
        self._grouped_at = float("-inf")
        self._tried: dict[tuple[str, str], float] = {}
        self.last: PrepareReport | None = None

    # --- the loop (ops.job.PeriodicThread: start, stop, a failed pass logged) -------------------------
    def enabled(self) -> bool:
        return self.tokens_per_hour > 0

    def stop(self) -> None:
        self._stop.set()  # also cancels a prepare call in progress

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def one_pass(self) -> None:
        self.last = self.run_once()

    # --- one pass -------------------------------------------------------------------------------------
    def run_once(self) -> PrepareReport:
        llm, cache = self.chain.llm, self.chain.cache
        if self.tokens_per_hour <= 0 or llm is None or cache is None:
            return PrepareReport("off", note="budget 0" if self.tokens_per_hour <= 0 else "no LLM or no cache")
        now = self.clock()
        if not take_lease(self.db, now, self.holder, name=LEASE):
            return PrepareReport("lease", note="another replica prepares answers now")
        spent = tokens_spent(self.db, now - timedelta(hours=1))
        if spent >= self.tokens_per_hour:
            return PrepareReport("budget", spent=spent, note=f"{spent} of {self.tokens_per_hour} tokens this hour")
        if busy := engine_busy(llm.status()):
            return PrepareReport("busy", spent=spent, note=busy)
        candidate, personal = self._candidate(now, cache)
        if candidate is None:
            return PrepareReport("nothing", spent=spent, skipped_personal=personal)
        report = self._prepare(candidate, spent)
        report.skipped_personal = personal
        return report

    def _recurring(self, now: datetime) -> list[RecurringGroup]:
        if time.monotonic() - self._grouped_at >= REGROUP_S:
            kb = self.chain.kb
            self._groups = recurring_questions(self.db, kb.embed_messages, since=now - self.window,
                                               space_of=kb.space_for, top=self.top)
            self._followups = follow_up_index(self.db, self._groups, now - self.window)
            self._grouped_at = time.monotonic()
        return self._groups

    def regroup(self) -> None:
        """Read the request log again at the next pass (the groups are otherwise kept for REGROUP_S)."""
        self._grouped_at = float("-inf")

    def _candidate(self, now: datetime, cache: ResponseCache) -> tuple[_Candidate | None, int]:
        """The group that needs an answer, predicted follow-ups of the conversations going on now first, else the
        largest; and how many personal groups were passed over."""
        thresholds = self.service.policy.current()
        deleted = prepared_store.tombstoned(self.db, self.chain.kb.version)
        personal = 0
        groups = self._recurring(now)
        ordered = predicted_first(groups, self._followups.scores(active_states(self.db, now))) if groups else []
        for group, predicted in ordered:
            question = group.representative
            if group.personal or not ResponseCache.cacheable(question)[0]:
                personal += 1  # never prepared: one customer's details must not reach another
                continue
            request = ChatRequest(message=question, user_id=USER, channel=PREPARE_CHANNEL, priority=PRIORITY)
            namespace = self.chain.cache_namespace(request, thresholds)
            key = normalise(question)
            if key in deleted or time.monotonic() - self._tried.get((namespace, key), float("-inf")) < RETRY_AFTER_S:
                continue
            cached = cache.lookup_exact(question, namespace)
            if cached is not None and cached.payload.get("origin") != REPLACED_ORIGIN:
                continue  # a fresh answer is cached already (a customer's, or one prepared before)
            return _Candidate(group, request, namespace, predicted), personal
        return None, personal

    def _prepare(self, candidate: _Candidate, spent: int) -> PrepareReport:
        """Send the question through the service while a watcher cancels it on live traffic; record what the chain
        stored."""
        llm = self.chain.llm
        assert llm is not None
        if busy := engine_busy(llm.status()):  # grouping took a while: look again just before sending
            return PrepareReport("busy", spent=spent, note=busy)
        cancel, done = threading.Event(), threading.Event()
        why: list[str] = []

        def watch() -> None:
            while not done.wait(WATCH_S):
                reason = "the worker stopped" if self._stop.is_set() else engine_busy(llm.status(), own=1)
                if reason:
                    why.append(reason)
                    cancel.set()
                    return

        watcher = threading.Thread(target=watch, name="tandem-prepare-watch", daemon=True)
        watcher.start()
        try:
            response = None
            for item in self.service.stream(candidate.request, cancel):  # ends with the logged response
                if isinstance(item, ChatResponse):
                    response = item
        finally:
            done.set()
            watcher.join()
        assert response is not None
        question = candidate.group.representative
        self._tried[(candidate.namespace, normalise(question))] = time.monotonic()
        report = PrepareReport("rejected", question=question, request_id=response.request_id, spent=spent,
                               tokens=response.prompt_tokens + response.completion_tokens, response=response,
                               predicted=candidate.predicted)
        if response.cancelled:
            report.outcome, report.note = "cancelled", f"live traffic: {why[0] if why else 'cancelled'}"
            return report
        stored = next((step for step in response.trace if step.get("stage") == "remember"
                       and step.get("decision") == "stored"
                       and step.get("detail", {}).get("origin") == PREPARED_ORIGIN), None)
        if stored is None:
            report.note = (f"served {response.route}: " + "; ".join(response.reasons[-2:])
                           if response.route != LLM_ROUTE else "the LLM text did not pass its checks, or was not "
                           "cacheable: nothing stored")
            return report
        report.outcome = "prepared"
        report.prepared = prepared_store.record(
            self.db, question=question, answer=response.answer, namespace=stored["detail"]["namespace"],
            entry_key=normalise(question), kb_version=self._kb_version(response.request_id),
            group_size=candidate.group.count, sessions=candidate.group.sessions, tokens=report.tokens,
            request_id=response.request_id)
        return report

    def _kb_version(self, request_id: str) -> str:
        with self.db.session() as session:
            row = session.get(RequestLog, request_id)
        return row.kb_version if row is not None else self.chain.kb.version


def delete_prepared(db: Database, prepared_id: int, cache: ResponseCache | None = None) -> PreparedAnswer | None:
    """An operator deletes a prepared answer: its row is tombstoned (the chain stops serving its entry, in every
    process, and the worker does not prepare it again for this KB version) and, where the caller shares the app's
    cache (Redis), the entry is dropped from it at once."""
    row = prepared_store.mark_deleted(db, prepared_id)
    if row is not None and cache is not None:
        cache.forget(row.question, row.namespace)
    return row


def status_of(row: PreparedAnswer, kb_version: str, ttl_s: float, now: datetime) -> str:
    """How the console shows a prepared answer: live, retired (the KB changed since), expired (past the cache's
    time-to-live) or deleted."""
    if row.deleted:
        return "deleted"
    if row.kb_version != kb_version:
        return "retired: the KB changed"
    created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=now.tzinfo)
    if ttl_s and (now - created).total_seconds() > ttl_s:
        return "expired"
    return "live"
