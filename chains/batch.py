"""Batch routing without any LLM: `tandem route-batch`, `make eval` and the bench share it."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from chains.router_chain import RouterChain, Turn
from chains.routers.base import get_router
from chains.rules import RuleBook
from chains.schema import ChatRequest
from storage.settings_store import Thresholds


def batch_chain(kb, router_name: str | None = None, texts: list[str] | None = None) -> RouterChain:
    """A chain over `kb` with the cache off; the texts given are embedded up front, in batches."""
    from tandem.models import embedder

    model = embedder()
    known = dict(zip(texts, model.encode(texts, batch_size=64))) if texts else {}
    return RouterChain(kb=kb, router=get_router(router_name), embed=lambda text: known.get(text)
                       if text in known else model.encode_one(text), cache=None, rules=RuleBook(), llm=None, run_tools=False)


def route_record(chain: RouterChain, text: str, thresholds: Thresholds, query_id: str = "") -> dict:
    turn = chain.route_only.invoke(Turn(request=ChatRequest(message=text, channel="batch"), thresholds=thresholds))
    if turn.done:
        route = turn.route
    else:  # a draft the LLM would rewrite is answered by the LLM, as `tandem ask` reports it
        route = "llm" if turn.plan in ("llm", "rewrite") else "small"
    return {"query_id": query_id, "route": route,
            "answer_id": turn.hits[0].answer_id if turn.hits else None,
            "p_llm": turn.scores.get("p_llm"), "reasons": turn.reasons,
            "rewrite": turn.plan == "rewrite", "kb_top": turn.scores.get("kb_top")}


def route_rows(kb_csv: Path, questions_csv: Path | None, rows: list[dict[str, str]], router_name: str | None = None,
               tau: float | None = None) -> Iterator[dict]:
    from knowledge.retrieval import throwaway_kb
    from storage.settings_store import live_settings

    try:
        thresholds = live_settings()
    except Exception:
        thresholds = Thresholds.defaults()
    if tau is not None:
        thresholds = thresholds.model_copy(update={"route_threshold": tau})
    kb = throwaway_kb(kb_csv, questions_csv)
    texts = [" ".join((row.get("query") or "").split()) for row in rows]
    chain = batch_chain(kb, router_name, [t for t in texts if t])
    for index, row in enumerate(rows):
        yield route_record(chain, row.get("query") or "", thresholds, row.get("query_id") or str(index))
