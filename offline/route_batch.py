"""Batch routing without any LLM: `tandem route-batch`, `make eval`, router training and the bench share it.

The chain is the product's own (same stages, same router, same thresholds); only the cache is off, the order
tool is not run, and the messages are embedded up front in batches.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from pathlib import Path

from chains.llm.base import LLM
from chains.router_chain import RouterChain
from chains.routers import RouterSource, fixed_router
from chains.rules import RuleBook
from chains.schema import ChatRequest
from chains.tiers.base import LLM_ROUTE
from chains.turn import Turn
from core.encoders import AUTO, load_encoder
from core.errors import TandemError
from core.policy import Thresholds
from core.settings import get_settings
from knowledge.base import KnowledgeBase


def batch_chain(kb: KnowledgeBase, router_name: str | None = None, texts: list[str] | None = None,
                live: bool = False, llm: LLM | None = None) -> RouterChain:
    """A chain over `kb` with the cache off; the texts given are embedded up front, in batches.

    The router is the shipped artifact (reproducible evaluation), or with ``live`` the one promoted in the
    configured database (what the running app uses). Without ``llm`` LLM-bound messages get the small tier (routing
    only); with one (`make eval`'s answers section) the chain answers as the product does, its LLM answers held until
    checked as TANDEM_LLM_HOLD_UNTIL_CHECKED says."""
    # Each message is embedded as the chain would (its search text, by its language's encoder), but in batches.
    messages = list(dict.fromkeys(texts or []))
    known = {kb.search_text(m): v for m, v in zip(messages, kb.embed_messages(messages))}
    settings = get_settings()
    name = router_name or settings.router
    if live:
        from storage.db import open_database

        router = RouterSource(open_database(settings.db_url).init(), name).current()
    else:
        router = fixed_router(name)
    return RouterChain(kb=kb, router=lambda: router, embed=lambda text: known[text] if text in known
                       else kb.encoder_for(text).encode_query(text), cache=None, rules=RuleBook(settings.rules_path), llm=llm,
                       db=None, run_tools=False,
                       hold_until_checked=settings.llm_hold_until_checked,
                       stop_when_broken=settings.llm_stop_when_broken, clarify_margins=settings.clarify_margins)


def route_record(chain: RouterChain, text: str, thresholds: Thresholds, query_id: str = "") -> dict:
    turn = chain.route_only.invoke(Turn(request=ChatRequest(message=text, channel="batch"), thresholds=thresholds))
    # The tier that would answer (a draft the LLM would rewrite is answered by the LLM, as `tandem ask` reports it)
    route = turn.route if turn.done else chain.tier_of_plan.get(turn.plan, LLM_ROUTE)
    return {"query_id": query_id, "route": route,
            "answer_id": turn.hits[0].answer_id if turn.hits else None,
            "p_llm": turn.scores.get("p_llm"), "reasons": turn.reasons,
            "rewrite": turn.plan == "rewrite", "kb_top": turn.scores.get("kb_top"),
            "kb_margin": turn.scores.get("kb_margin"), "dense_top": turn.scores.get("dense_top"),
            "draft_quality": turn.scores.get("draft_quality")}


def read_queries(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    if rows and ("query" not in rows[0]):
        raise TandemError(f"{path} needs a 'query' column (and optionally 'query_id')")
    return rows


def live_thresholds() -> Thresholds:
    """The policy the running app uses (its database), or the defaults when there is none yet."""
    try:
        from chains.policy import LivePolicy
        from storage.db import open_database

        return LivePolicy(open_database(get_settings().db_url), Thresholds.defaults(get_settings())).current()
    except Exception:
        return Thresholds.defaults(get_settings())


def route_rows(kb_csv: Path, questions_csv: Path | None, rows: list[dict[str, str]], router_name: str | None = None,
               tau: float | None = None, tune: bool = True, progress: bool = False,
               log: Callable[[str], None] = print) -> Iterator[dict]:
    """Route ``rows`` against a throwaway KB built as the product builds one.

    With the default encoder (``auto``) and ``tune``, that includes the encoder tuned on the KB's content: trained
    on the first run (minutes), then reused from ``$TANDEM_HOME/encoders`` for the same files. An encoder named in
    TANDEM_ENCODER is used as named, untuned, as the product would."""
    from knowledge.throwaway import throwaway_kb
    from offline.kbs import build_kb

    thresholds = live_thresholds()
    if tau is not None:
        thresholds = thresholds.model_copy(update={"route_threshold": tau})
    encoder = get_settings().encoder
    if encoder == AUTO:
        kb = build_kb(kb_csv, questions_csv, tune=tune, log=log, progress=progress)
        if not tune:
            log("--no-tune: routing with the base MiniLM")
    else:
        kb = throwaway_kb(load_encoder(encoder, settings=get_settings()), kb_csv, questions_csv)
        log(f"TANDEM_ENCODER={encoder}: routing with that encoder, not tuned")
    texts = [" ".join((row.get("query") or "").split()) for row in rows]
    chain = batch_chain(kb, router_name, [t for t in texts if t], live=True)
    for index, row in enumerate(rows):
        yield route_record(chain, row.get("query") or "", thresholds, row.get("query_id") or str(index))

