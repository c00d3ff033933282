"""Section 3: hybrid vs always-LLM vs always-small on the same traffic.

Routing decisions are computed for every query with batch routing (`offline.route_batch.route_record`). The LLM
on CPU is slow, so its latency and tokens are measured on a sample of real calls to a running `LLMServer`
and the per-call figures are applied to every LLM call a policy makes (stated in the report).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.common import mean, pct, rng
from bench.traffic import limited
from chains.tiers.base import SMALL_ROUTE
from core.model_files import local_llm
from core.settings import get_settings
from offline import datasets as ds
from offline.datasets import Query

HINT3_BOTS = ("sofmattress", "curekart", "powerplay11")
GROUNDING_ASSUMPTION = ("An in-scope query answered by the LLM counts as correct when the top retrieved KB answer "
                        "(its grounding context) is the labelled one; so the correct-KB-answer rate is the same for "
                        "all three policies, and they differ in out-of-scope leakage, latency and cost.")


if TYPE_CHECKING:
    from chains.router_chain import RouterChain
    from knowledge.base import KnowledgeBase


@dataclass
class Group:
    name: str
    kb_note: str
    kb: KnowledgeBase
    queries: list[Query]
    chain: RouterChain | None = None
    records: list[dict] = field(default_factory=list)


def _clean(text: str) -> str:
    return " ".join(text.split())


def fit_sizes(sizes, log: Callable[[str], None]) -> tuple[object, dict]:
    """Shrink section 3's samples when embedding them would blow the time budget (a crowded machine).

    Measures this machine's batch embedding speed now and scales the test and KB-paraphrase samples (never
    the HINT3 KBs) so that the embedding fits ``sizes.embed_budget_s``. Returns the sizes and a note."""
    import dataclasses
    import time

    from core.encoders import load_encoder

    encoder = load_encoder(settings=get_settings())
    probe = [q.text for q in ds.bitext("train")[:128]]
    encoder.encode_passages(probe[:8])
    began = time.perf_counter()
    encoder.encode_passages(probe)
    per_text = (time.perf_counter() - began) / len(probe)
    hint3_train = sum(not q.needs_llm for q in ds.hint3("train"))
    counts = {"per_bot_limit": sizes.per_bot_limit or 900, "bitext_limit": sizes.bitext_limit or 1272,
              "bitext_kb_questions": sizes.bitext_kb_questions or 5092, "tau_limit": sizes.tau_limit or 165}
    planned = hint3_train + 3 * counts["per_bot_limit"] + sum(v for k, v in counts.items() if k != "per_bot_limit")
    estimate = planned * per_text
    note: dict[str, object] = {"embed_ms_per_text": round(per_text * 1000, 2), "planned_texts": planned,
            "estimated_embed_s": round(estimate, 1), "scaled": False}
    if estimate <= sizes.embed_budget_s:
        return sizes, note
    factor = max(0.1, (sizes.embed_budget_s / per_text - hint3_train) / (planned - hint3_train))
    scaled = {k: max(20, int(v * factor)) for k, v in counts.items()}
    log(f"  embedding runs at {per_text * 1000:.1f} ms/text here: section 3 samples scaled by {factor:.2f}")
    note.update(scaled=True, factor=round(factor, 3), sizes=scaled)
    return dataclasses.replace(sizes, **scaled), note


def build_groups(sizes, work: Path, app_chroma: Path, log: Callable[[str], None]) -> list[Group]:
    """HINT3 per bot (KB = that bot's train questions) and Bitext + tau-bench (KB = Bitext answers + train
    questions). The Bitext KB is written into the app's store, so the app serves the same KB afterwards."""
    from core.encoders import load_encoder
    from core.settings import get_settings
    from knowledge.chroma_kb import ChromaKnowledgeBase
    from knowledge.throwaway import throwaway_kb

    encoder = load_encoder(settings=get_settings())
    groups = []
    hint3_train, hint3_test = ds.hint3("train"), ds.hint3("test")
    for bot in HINT3_BOTS:
        train = [q for q in hint3_train if q.group.endswith(bot)]
        log(f"  HINT3 {bot}: KB of {sum(not q.needs_llm for q in train)} train questions")
        kb = throwaway_kb(encoder, ds.intent_kb(work / bot, train))
        test = limited([q for q in hint3_test if q.group.endswith(bot)], sizes.per_bot_limit)
        groups.append(Group(f"hint3/{bot}", "that bot's train questions, one answer per intent", kb, test))

    answers = ds.bitext_answers()
    questions = [(q.text, q.answer_id) for q in limited(ds.bitext("train"), sizes.bitext_kb_questions)]
    log(f"  Bitext: KB of {len(answers)} answers + {len(questions)} train questions (also the app's KB)")
    files = ds.write_kb_csvs(work / "bitext", answers, questions)
    kb = ChromaKnowledgeBase(encoder, path=app_chroma, collection=get_settings().kb_collection)
    kb.ingest(files, progress=False)
    mix = limited(ds.bitext("test"), sizes.bitext_limit) + limited(ds.tau_bench(("test",)), sizes.tau_limit)
    rng().shuffle(mix)
    groups.append(Group("bitext+tau", "Bitext kb_answers + train questions; tau-bench test mixed in", kb, mix))
    return groups


def route_groups(groups: list[Group], log: Callable[[str], None]) -> None:
    from offline.route_batch import batch_chain, live_thresholds, route_record

    thresholds = live_thresholds()
    for group in groups:
        texts = [_clean(q.text) for q in group.queries]
        log(f"  batch routing {len(texts)} queries of {group.name}")
        group.chain = batch_chain(group.kb, texts=[t for t in texts if t])
        group.records = [route_record(group.chain, text, thresholds, str(i)) for i, text in enumerate(texts)]


def llm_bound(record: dict) -> bool:
    """The service sends both `llm` plans and `rewrite` plans (route_record reports those as small) to the LLM."""
    return record["route"] == "llm" or bool(record["rewrite"])


def sample_llm_calls(groups: list[Group], calls: int, budget_s: float, server,
                     log: Callable[[str], None]) -> tuple[list[dict], dict]:
    """Real calls through the real client: half LLM-bound queries (as hybrid sends them), half others
    (as always-LLM sends them), spread over the groups. Stops early once `budget_s` is spent (at least two
    answered calls); a server that died is started again and the restart is reported."""
    import time

    from chains.llm.client import LLMClient, LLMUnavailable
    from chains.schema import ChatRequest
    from chains.turn import Turn
    from core.settings import get_settings
    from offline.route_batch import live_thresholds

    thresholds = live_thresholds()
    picks: list[tuple[Group, str]] = []
    per_group = max(1, -(-calls // len(groups)))
    for group in groups:
        order = list(range(len(group.queries)))
        rng().shuffle(order)
        bound = [i for i in order if llm_bound(group.records[i]) and group.records[i]["route"] != "tool"]
        other = [i for i in order if not llm_bound(group.records[i]) and group.records[i]["route"] == SMALL_ROUTE]
        chosen = (bound[: (per_group + 1) // 2] + other[: per_group // 2])[:per_group]
        picks += [(group, _clean(group.queries[i].text)) for i in chosen]
    # Interleave the groups so an early stop still samples every kind of traffic.
    picks = [p for i in range(per_group) for p in picks[i::per_group]][:calls]
    client = LLMClient(get_settings(), poll_metrics=False)
    results: list[dict] = []
    events: dict[str, Any] = {"server_restarts": 0, "server_exit_codes": [], "stopped_at_budget": False}
    began = time.perf_counter()
    for group, text in picks:
        answered = sum(r["ok"] for r in results)
        if time.perf_counter() - began > budget_s and answered >= 2:
            events["stopped_at_budget"] = True
            log(f"    LLM sample budget of {budget_s:.0f} s spent after {len(results)} calls")
            break
        if not server.alive():  # something outside the bench stopped it; say so and start it again
            events["server_restarts"] += 1
            process = server.child.process if server.child else None
            events["server_exit_codes"].append(process.returncode if process else None)
            log("    LLM server is not running; starting it again")
            client.close()
            server.start(wait=True, timeout=240)
            client = LLMClient(get_settings(), poll_metrics=False)
        assert group.chain is not None  # route_groups made it
        turn = group.chain.route_only.invoke(Turn(request=ChatRequest(message=text, channel="batch"),
                                                  thresholds=thresholds))
        messages = group.chain.llm_request(turn)
        try:
            result = client.complete(messages, score=turn.scores.get("p_llm"))
        except LLMUnavailable as exc:
            results.append({"group": group.name, "ok": False, "error": exc.reason})
            log(f"    LLM call failed: {exc.reason}")
            continue
        results.append({"group": group.name, "ok": True, "kind": "rewrite" if turn.plan == "rewrite" else "answer",
                        "latency_ms": result.latency_ms, "ttft_ms": result.ttft_ms,
                        "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens})
        log(f"    LLM call {len(results)}/{len(picks)}: {result.latency_ms / 1000:.1f} s, "
            f"{result.prompt_tokens}+{result.completion_tokens} tokens")
    client.close()
    return results, events


def compare(groups: list[Group], llm_calls: list[dict], small_ms: list[float], pre_llm_ms: list[float],
            price_per_1k: float) -> dict:
    """Per-policy latency, LLM calls, tokens, cost and quality, per group and over all traffic.

    Each query gets its component latencies from the measured samples, taken in turn (query i uses sample
    i mod n), so means equal the sample means and p95 reflects their spread.
    """
    ok = [c for c in llm_calls if c.get("ok")]
    if not ok or not small_ms or not pre_llm_ms:
        raise RuntimeError("no LLM latency sample or no small-tier timings: cannot compare policies")
    llm_ms = [c["latency_ms"] for c in ok]
    tokens_per_call = float(np.mean([c["prompt_tokens"] + c["completion_tokens"] for c in ok]))
    report: dict = {"groups": {}}
    everything: tuple[list, list] = ([], [])
    for group in groups:
        report["groups"][group.name] = _policies(group.queries, group.records, llm_ms, tokens_per_call, small_ms,
                                                 pre_llm_ms, price_per_1k)
        report["groups"][group.name]["kb"] = group.kb_note
        everything[0].extend(group.queries)
        everything[1].extend(group.records)
    report["all"] = _policies(everything[0], everything[1], llm_ms, tokens_per_call, small_ms, pre_llm_ms,
                              price_per_1k)
    report.update({
        "llm_latency_source": f"measured on {len(ok)} real calls ({local_llm(get_settings()).title}, vLLM, CPU, "
                              f"max_tokens {_max_tokens()}), applied per call",
        "llm_sample": {"calls": len(llm_calls), "failed": len(llm_calls) - len(ok),
                       "errors": sorted({c["error"] for c in llm_calls if not c.get("ok")})[:3], "latency_ms": pct(llm_ms),
                       "mean_latency_ms": mean(llm_ms), "mean_ttft_ms": mean(c["ttft_ms"] for c in ok),
                       "mean_tokens_per_call": round(tokens_per_call, 1),
                       "mean_prompt_tokens": mean(c["prompt_tokens"] for c in ok),
                       "mean_completion_tokens": mean(c["completion_tokens"] for c in ok),
                       "tokens_per_s": round(sum(c["completion_tokens"] for c in ok)
                                             / max(sum(c["latency_ms"] for c in ok) / 1000, 1e-9), 2)},
        "small_latency_source": f"server-side totals of {len(small_ms)} small-tier answers in section 1, "
                                "applied per query; an LLM-bound query pays that routing and the LLM call",
        "quality_assumption": GROUNDING_ASSUMPTION,
        "token_counting": "the LLM client's counts: the server's usage (vLLM reports it in the last streamed "
                          "chunk); without it, prompt tokens are ~4 characters each and completion tokens one per "
                          "streamed chunk",
        "cache": "off (batch routing): a repeated question would be cheaper still in production",
    })
    return report


def _max_tokens() -> int:
    from core.settings import get_settings

    return get_settings().llm_max_tokens


def _policies(queries, records, llm_ms, tokens_per_call, small_ms, pre_llm_ms, price) -> dict:
    n = len(queries)
    hybrid_llm = np.array([llm_bound(r) for r in records])
    small_answer = np.array([r["route"] == SMALL_ROUTE and not r["rewrite"] for r in records])
    in_scope = np.array([not q.needs_llm and bool(q.answer_id) for q in queries])
    oos = np.array([bool(q.needs_llm) for q in queries])
    correct = np.array([r["answer_id"] is not None and r["answer_id"] == q.answer_id for q, r in zip(queries, records)])
    small_i = np.array([small_ms[i % len(small_ms)] for i in range(n)])
    pre_i = np.array([pre_llm_ms[i % len(pre_llm_ms)] for i in range(n)])
    llm_i = np.array([llm_ms[i % len(llm_ms)] for i in range(n)])
    latency = {"always_small": small_i, "hybrid": np.where(hybrid_llm, small_i + llm_i, small_i),
               "always_llm": pre_i + llm_i}
    calls = {"always_small": 0, "hybrid": int(hybrid_llm.sum()), "always_llm": n}
    small_answered = {"always_small": np.ones(n, bool), "hybrid": small_answer, "always_llm": np.zeros(n, bool)}
    correct_rate = round(float(correct[in_scope].mean()), 4) if in_scope.any() else None
    out: dict = {"queries": n, "in_scope_labelled": int(in_scope.sum()), "out_of_scope": int(oos.sum()),
                 "route_counts": {k: int(v) for k, v in zip(*np.unique([r["route"] + ("/rewrite" if r["rewrite"]
                                                                                       else "") for r in records],
                                                                        return_counts=True))}}
    for policy in ("hybrid", "always_llm", "always_small"):
        tokens = calls[policy] * tokens_per_call
        leaked = int((small_answered[policy] & oos).sum())
        out[policy] = {
            "latency_mean_ms": round(float(latency[policy].mean()), 1),
            "latency_p95_ms": round(float(np.percentile(latency[policy], 95)), 1),
            "llm_calls": calls[policy], "llm_call_share": round(calls[policy] / max(n, 1), 4),
            "llm_tokens": int(round(tokens)), "cost_usd": round(tokens / 1000 * price, 4),
            "correct_kb_answer_rate": correct_rate,
            "in_scope_answered_by_small_share": round(float(small_answered[policy][in_scope].mean()), 4)
            if in_scope.any() else None,
            "oos_answered_by_small": leaked,
            "oos_answered_by_small_rate": round(leaked / oos.sum(), 4) if oos.any() else None,
        }
    always_llm = out["always_llm"]
    out["hybrid_vs_always_llm"] = {
        "latency_mean_ratio": round(out["hybrid"]["latency_mean_ms"] / always_llm["latency_mean_ms"], 4),
        "llm_call_share": out["hybrid"]["llm_call_share"],
        "token_ratio": round(out["hybrid"]["llm_tokens"] / max(always_llm["llm_tokens"], 1), 4),
        "cost_ratio": round(out["hybrid"]["cost_usd"] / always_llm["cost_usd"], 4) if always_llm["cost_usd"] else None,
    }
    return out
