"""`make eval`, answers section: the quality of the answer the customer finally reads, through the whole chain.

Routing is measured in offline/evaluate.py without any LLM. Here every message goes through the product's chain
(guard, rules, router, thresholds, small tier or the real LLM, the answer check, the rewrite's verification) with
a real vLLM server behind it, and the final answer is scored (offline/answer_report.py):

- the Bitext held-out set against the Bitext FAQ (answers + train questions, encoder tuned on it, as the routing
  eval builds it: offline/kbs.py);
- the Chinese test split and the demo-shop set (its held-out split; ``demo-dev`` its development split) against
  the demo KB as `make demo` ships it: English and Chinese answers, Chinese in the e5 space.

`tandem eval` starts its own vLLM server the way `tandem llm-server` does, on a free port, and stops it at the end
(its whole process group), unless TANDEM_LLM_URL names a server that already answers (tandem.llm_server.
eval_endpoint); called from code, the eval uses the endpoint it is given. Each message is answered
fresh: no response cache, no rate limit, and no load gate (messages go one at a time; on a busy machine the gate
would send slow answers to the small tier and hide them from the measure).
"""

from __future__ import annotations

import csv
import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from chains.answers import fill_template
from chains.check import sources_of, written_stand_ins
from chains.llm.base import LLM, LLMResult
from chains.router_chain import RouterChain
from chains.schema import CLARIFY_SERVED, ChatRequest, Revised
from chains.turn import Turn
from core.policy import Thresholds
from core.settings import Settings, get_settings
from knowledge.base import KnowledgeBase
from knowledge.demo_kb import DEMO_DIR
from offline import datasets as ds
from offline.answer_report import Outcome, not_answering, score, set_report, summary
from offline.route_batch import batch_chain

DEMO_SHOP = ds.EVAL_DIR / "demo_shop.csv"
ANSWER_LABELS = ds.EVAL_DIR / "answers_the_question.csv"  # a person's labels: does the served answer answer it?


@dataclass(frozen=True)
class EvalSet:
    name: str
    label: str
    path: Path
    split: str | None   # rows of this split only (None: all rows)
    kb: str             # "bitext" or "demo"


EVAL_SETS = {s.name: s for s in (
    EvalSet("demo", "demo shop", DEMO_SHOP, "heldout", "demo"),
    EvalSet("demo-dev", "demo shop (dev)", DEMO_SHOP, "dev", "demo"),
    EvalSet("heldout", "Bitext", ds.BITEXT_HELDOUT, None, "bitext"),
    EvalSet("zh", "Chinese", ds.CHINESE, "test", "demo"))}
DEFAULT_SETS = ("demo", "heldout", "zh")
KB_LABELS = {"bitext": "Bitext FAQ, encoder tuned on it", "demo": "demo KB as `make demo` ships it"}


@dataclass(frozen=True)
class Message:
    query_id: str
    text: str
    expected: str       # the right answer's id; "" out of scope
    in_scope: bool


def read_messages(eval_set: EvalSet) -> list[Message]:
    with eval_set.path.open(newline="", encoding="utf-8-sig") as handle:
        rows = [r for r in csv.DictReader(handle) if eval_set.split is None or r.get("split") == eval_set.split]
    return [Message(r.get("query_id") or f"{eval_set.name}-{i}", r["query"], (r.get("answer_id") or "").strip(),
                    r.get("in_scope") == "True") for i, r in enumerate(rows)]


def spread(messages: list[Message], limit: int | None) -> list[Message]:
    """At most ``limit`` messages, evenly spread over the file and keeping its out-of-scope share (a file lists
    its messages answer by answer: the first N would all ask the same thing)."""
    if not limit or len(messages) <= limit:
        return messages
    out = [m for m in messages if not m.in_scope]
    n_out = min(len(out), max(1, round(limit * len(out) / len(messages)))) if out else 0
    pick = lambda rows, n: [rows[i * len(rows) // n] for i in range(n)] if n else []  # noqa: E731
    chosen = set(pick(out, n_out) + pick([m for m in messages if m.in_scope], limit - n_out))
    return [m for m in messages if m in chosen]


def references(kb: str) -> dict[str, str]:
    """Every KB answer's text by answer id (the right answer of a message is scored against it)."""
    if kb == "bitext":
        return ds.bitext_answers()
    return {r["answer_id"]: r["answer"] for name in ("answers.csv", "answers_zh.csv")
            for r in ds.read_csv(DEMO_DIR / name)}


def build_kb(kb: str, work: Path, log: Callable[[str], None]) -> KnowledgeBase:
    if kb == "bitext":
        from offline.kbs import build_kb as build

        log("answers: the Bitext FAQ (answers + train questions), encoder tuned on it")
        files = ds.write_kb_csvs(work / "bitext", ds.bitext_answers(), [(q.text, q.answer_id) for q in ds.bitext("train")])
        return build(*files, tune=True, log=log)
    from offline.router_training import chinese_kb

    log("answers: the demo KB as `make demo` ships it (English and Chinese, Chinese in the e5 space)")
    return chinese_kb(work / "demo")


class EvalLLM(LLM):
    """The product's LLM client without its load gate: the eval sends one message at a time, and on a busy
    machine the gate would answer slow ones from the small tier, which is not what is being measured."""

    def __init__(self, client: LLM):
        self.client = client

    def stream(self, messages: list[dict], *, max_tokens: int | None = None, score: float | None = None,
               cancel: threading.Event | None = None, temperature: float | None = None,
               user_id: str = "", priority: int = 0) -> Iterator[str | LLMResult]:
        return self.client.stream(messages, max_tokens=max_tokens, score=score, cancel=cancel,
                                  temperature=temperature, user_id=user_id, priority=priority)

    def admit(self, user_id: str) -> tuple[bool, str]:
        return True, "eval: one message at a time, no load gate"

    def status(self) -> dict[str, Any]:
        return self.client.status()

    def close(self) -> None:
        self.client.close()


Endpoint = AbstractContextManager[tuple[str, Callable[[], None]]]


@contextmanager
def server_already_up(url: str, log: Callable[[str], None]) -> Iterator[tuple[str, Callable[[], None]]]:
    """The LLM endpoint at ``url``, already answering (the eval's default; `tandem eval` starts one of its own when
    none answers: tandem.llm_server.eval_endpoint)."""
    log(f"answers: using the LLM server already up at {url}")
    yield url, lambda: None


def answer(chain: RouterChain, set_name: str, message: Message, thresholds: Thresholds) -> Outcome:
    """One message through the whole chain, timed from the start to its first text and to its end."""
    turn = Turn(request=ChatRequest(message=message.text, channel="batch"), thresholds=thresholds)
    started = time.perf_counter()
    first: float | None = None
    final, shown, taken_back = turn, False, False
    for item in chain.stream(turn):
        if isinstance(item, Turn):
            final = item
            continue
        if first is None and ((isinstance(item, str) and item.strip()) or isinstance(item, Revised)):
            first = round((time.perf_counter() - started) * 1000, 1)
        taken_back = taken_back or (shown and isinstance(item, Revised))
        shown = shown or (isinstance(item, str) and bool(item.strip()))
    total = round((time.perf_counter() - started) * 1000, 1)
    draft = final.draft.text if final.draft is not None else ""
    top = (final.sources[0].get("answer_id") if final.sources
           else final.hits[0].answer_id if final.hits else None)
    return Outcome(set=set_name, query_id=message.query_id, message=message.text, expected=message.expected,
                   in_scope=message.in_scope, plan=final.plan, route=final.route,
                   served=final.served or final.route, answer=final.answer, draft=draft,
                   top_answer_id=top, finish_reason=final.finish_reason,
                   choices=[c["answer_id"] for c in final.suggestions] if final.served == CLARIFY_SERVED else [],
                   sources=sources_of(final.hits, draft, final.text, final.history),
                   context=[h.answer for h in final.hits] + ([draft] if final.plan == "rewrite" else [])
                   + written_stand_ins((f.get("kind", ""), f.get("action", "")) for f in final.findings),
                   findings=list(final.findings), first_text_ms=first, total_ms=total, error=final.error,
                   rejected_text=final.rejected_text, relevance=final.scores.get("answer_relevance"),
                   taken_back=taken_back and final.plan == "llm")


def run_set(chain: RouterChain, eval_set: EvalSet, messages: list[Message], refs: dict[str, str],
            log: Callable[[str], None]) -> list[dict[str, Any]]:
    thresholds = Thresholds.defaults(get_settings())
    records = []
    for index, message in enumerate(messages, 1):
        outcome = answer(chain, eval_set.name, message, thresholds)
        reference = refs.get(message.expected) if message.in_scope else None
        records.append(score(outcome, fill_template(reference, message.text) if reference else None))
        if index % 10 == 0 or index == len(messages):
            log(f"answers [{eval_set.name}] {index}/{len(messages)}")
    return records


def served_model(url: str) -> str:
    import httpx

    try:
        return str(httpx.get(url.rstrip("/") + "/models", timeout=5).json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return "unknown"


def run_answer_eval(sets: Sequence[str] = DEFAULT_SETS, limit: int | None = None,
                    log: Callable[[str], None] = print, *, kbs: dict[str, KnowledgeBase] | None = None,
                    records_path: Path | None = None, endpoint: Endpoint | None = None) -> dict[str, Any]:
    """Answer and score every message of ``sets`` (at most ``limit`` each); the report, and the per-message
    records in ``records_path`` (JSON lines). ``endpoint`` gives the LLM's URL and a wait until it answers (default:
    TANDEM_LLM_URL, already up)."""
    unknown = sorted(set(sets) - set(EVAL_SETS))
    if unknown:
        raise ValueError(f"unknown answer set(s) {', '.join(unknown)}; known: {', '.join(EVAL_SETS)}")
    settings, started = get_settings(), time.perf_counter()
    report: dict[str, Any] = {"date": date.today().isoformat(), "limit": limit, "max_tokens": settings.llm_max_tokens,
                              "hold": settings.llm_hold_until_checked,
                              "sets": {}, "skipped": {}}
    kbs, all_records = dict(kbs or {}), []
    endpoint = endpoint or server_already_up(settings.llm_url, log)
    with tempfile.TemporaryDirectory(prefix="tandem-answers-") as tmp, endpoint as (url, ready):
        todo = []
        for name in sets:
            eval_set = EVAL_SETS[name]
            if not eval_set.path.is_file():
                report["skipped"][name] = f"{eval_set.path.name} not found"
                log(f"answers [{name}]: skipped, {eval_set.path} not found")
                continue
            if eval_set.kb not in kbs:
                kbs[eval_set.kb] = build_kb(eval_set.kb, Path(tmp), log)
            todo.append((eval_set, spread(read_messages(eval_set), limit)))
        ready()
        llm = EvalLLM(_client(settings, url))
        try:
            for eval_set, messages in todo:
                log(f"answers [{eval_set.name}]: {len(messages)} messages through the whole chain")
                chain = batch_chain(kbs[eval_set.kb], texts=[m.text for m in messages], llm=llm)
                records = run_set(chain, eval_set, messages, references(eval_set.kb), log)
                report["sets"][eval_set.name] = {"label": eval_set.label, "kb": KB_LABELS[eval_set.kb],
                                                 **set_report(records)}
                if eval_set.name == "demo" and ANSWER_LABELS.is_file():
                    report["sets"]["demo"]["not_answering"] = not_answering(records, answer_labels())
                all_records += records
        finally:
            llm.close()
        report["model"] = served_model(url)
    report["all"] = set_report(all_records)
    report["summary"] = summary(report["sets"], report["all"])
    report["seconds"] = round(time.perf_counter() - started, 1)
    if records_path is not None:
        write_records(all_records, records_path)
    return report


def answer_labels() -> dict[tuple[str, str], str]:
    """(query id, served answer) -> "yes" or "no": whether it answers the question, by a person (ANSWER_LABELS)."""
    with ANSWER_LABELS.open(newline="", encoding="utf-8") as handle:
        return {(r["query_id"], r["answer"]): r["answers_the_question"] for r in csv.DictReader(handle)}


def _client(settings: Settings, url: str) -> LLM:
    from chains.llm.client import LLMClient

    return LLMClient(settings.model_copy(update={"llm_url": url}), poll_metrics=False)


def write_records(records: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
