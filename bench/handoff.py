"""The handoff to a person (issue 57), through a real `tandem serve` wired to a real vLLM:

(a) **to the inbox**: a customer asks for a person (`POST /api/v1/chat` "I want to talk to a human", a new
conversation each time, a `chat` key) and an operator polls the inbox (`GET /api/v1/inbox`, an `agent` key, every
50 ms, starting as the chat request is sent) until the conversation is in it: the time from sending the message until
the inbox shows it, p50/p95 over ``sessions`` conversations, with the chat request's own latency beside it.

(b) **to the offer of a person**: the demo shop's out-of-scope messages (knowledge/eval/demo_shop.csv, in_scope
False; the router sends them to the LLM, whose answers on this hardware nearly all fail their checks), one at a time,
each in a new conversation, with the predicted failure on (TANDEM_HANDOFF_ON_PREDICTED_FAILURE, the shipped rate
threshold, ``predict_sample`` answers counted). The first messages are answered by the LLM and fill the records
(**cold**: the messages before the first predicted one); once ``predict_sample`` LLM answers are counted and enough
of them failed, a message whose answer is predicted to fail is offered a person at once, its LLM answer written in
the background (**after the records**, from the first predicted message on; a message the router keeps on the KB is
counted there too, as it is for the customer). Reported per phase: how many messages ended
with the offer of a person (a colleague replies here), and the p50/p95 of their time to it. Target p50 <= 2 s.

    python -m bench.handoff [--sessions 20] [--messages 16] [--out reports/handoff.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import pct

ROOT = Path(__file__).resolve().parent.parent
DEMO_SHOP = ROOT / "knowledge" / "eval" / "demo_shop.csv"
ASK = "I want to talk to a human please"
POLL_S = 0.05
TARGET_OFFER_P50_S = 2.0


def out_of_scope(n: int) -> list[str]:
    """The demo shop's out-of-scope messages, held-out split first, ``n`` of them."""
    with DEMO_SHOP.open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["in_scope"] == "False"]
    rows.sort(key=lambda r: r["split"] != "heldout")
    return [r["query"] for r in rows[:n]]


def to_the_inbox(url: str, chat_key: str, agent_key: str, sessions: int) -> dict[str, Any]:
    """(a) Seconds from sending "talk to a human" until the agent's inbox lists the conversation."""
    shown, chat_s, missed = [], [], 0
    with httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {chat_key}"}) as customer, \
            httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {agent_key}"}) as agent:
        for _ in range(sessions):
            started = time.perf_counter()
            reply = customer.post("/api/v1/chat", json={"message": ASK})
            chat_s.append(time.perf_counter() - started)
            body = reply.json()
            session_id = body.get("session_id")
            found = None
            while session_id and time.perf_counter() - started < 30:
                listed = agent.get("/api/v1/inbox").json()
                if any(c["session_id"] == session_id for c in listed.get("conversations", [])):
                    found = time.perf_counter() - started
                    break
                time.sleep(POLL_S)
            if found is None or body.get("route") != "handoff":
                missed += 1
            else:
                shown.append(found)
    return {"sessions": sessions, "shown": len(shown), "missed": missed, "poll_s": POLL_S,
            "shown_after_s": _quantiles(shown), "chat_request_s": _quantiles(chat_s)}


def to_the_offer(url: str, chat_key: str, messages: list[str], predict_sample: int, db) -> dict[str, Any]:
    """(b) Each out-of-scope message in a new conversation: whether it ended with the offer of a person (queued for a
    colleague), whether by prediction (its request row carries the predicted rate; a customer's key is not shown the
    reasons), and how long it took. Cold: the messages before the first predicted one; then the rest."""
    from chains.forecast import BACKGROUND_SERVED, RATE
    from storage.tables import RequestLog

    rows = []
    with httpx.Client(base_url=url, timeout=300, headers={"Authorization": f"Bearer {chat_key}"}) as customer:
        for message in messages:
            started = time.perf_counter()
            body = customer.post("/api/v1/chat", json={"message": message}).json()
            took = time.perf_counter() - started
            handoff = body.get("handoff") or {}
            rows.append({"seconds": round(took, 3), "route": body.get("route"), "served": body.get("served"),
                         "offered": bool(handoff.get("triggered")) and handoff.get("status") == "waiting",
                         # the load gate sent it to the small tier (engine overloaded), or the LLM call failed
                         "degraded": bool(body.get("degraded")), "fallback": bool(body.get("fallback")),
                         "request_id": body.get("request_id")})
    time.sleep(20.0)  # the predicted messages' background answers, for their outcome
    with db.session() as session:
        for row in rows:
            logged = session.get(RequestLog, row.pop("request_id"))
            scores = (logged.scores if logged is not None else None) or {}
            row["predicted"] = RATE in scores
            if row["predicted"]:
                row["background_served"] = scores.get(BACKGROUND_SERVED)
    first = next((i for i, r in enumerate(rows) if r["predicted"]), len(rows))
    return {"messages": len(rows), "predict_sample": predict_sample, "source": f"{DEMO_SHOP.name} (in_scope False)",
            "target_p50_s": TARGET_OFFER_P50_S, "cold": _phase(rows[:first]), "after_records": _phase(rows[first:]),
            "all": _phase(rows), "rows": rows}


def _phase(rows: list[dict[str, Any]]) -> dict[str, Any]:
    offered = [r["seconds"] for r in rows if r["offered"]]
    return {"messages": len(rows), "offered": len(offered), "predicted": sum(r["predicted"] for r in rows),
            "degraded_or_fallback": sum(r["degraded"] or r["fallback"] for r in rows),
            "time_to_offer_s": _quantiles(offered)}


def _quantiles(values: list[float]) -> dict[str, float | None]:
    return pct(values, 50, 95)  # None where there is nothing to measure


def run(settings, sessions: int, messages: int, predict_sample: int, homes: dict, log) -> dict[str, Any]:
    """Start vLLM and the app (its own home), make the keys, run (a) then (b); both stopped on the way out."""
    from bench.common import app_env
    from bench.http_load import App
    from chains.bootstrap import prepare_storage
    from storage.api_keys import create_key
    from storage.db import open_database
    from tandem.llm_server import LLMServer
    from tandem.processes import free_port

    home = homes["app"].parent / "handoff-app"
    home.mkdir(parents=True, exist_ok=True)
    llm_port, app_port = free_port(), free_port()
    server = LLMServer(settings.model_copy(update={"llm_url": f"http://127.0.0.1:{llm_port}/v1"}), port=llm_port,
                       log_path=homes["logs"] / "handoff-vllm.log")
    app = None
    try:
        began = time.perf_counter()
        server.start(timeout=900)
        log(f"  vLLM ready after {time.perf_counter() - began:.0f} s ({server.model})")
        env = {**app_env(homes), "TANDEM_HOME": str(home), "TANDEM_LLM_URL": f"http://127.0.0.1:{llm_port}/v1",
               "TANDEM_HANDOFF_ON_PREDICTED_FAILURE": "true", "TANDEM_HANDOFF_PREDICT_SAMPLE": str(predict_sample)}
        app = App(port=app_port, env=env, log_path=homes["logs"] / "handoff-app.log").start(timeout=900)
        log(f"  app ready after {app.cold_start_s} s")
        db = prepare_storage(settings.model_copy(update={"home": home}),
                             open_database(f"sqlite:///{home / 'tandem.db'}"))
        chat_key, agent_key = create_key(db, "bench-shop", ["chat"]), create_key(db, "bench-operator", ["agent"])
        time.sleep(6.0)  # the app re-counts its keys every 5 s
        inbox = to_the_inbox(app.url, chat_key, agent_key, sessions)
        log(f"  to the inbox: p50 {inbox['shown_after_s']['p50']} s, p95 {inbox['shown_after_s']['p95']} s "
            f"({inbox['shown']} of {sessions})")
        offer = to_the_offer(app.url, chat_key, out_of_scope(messages), predict_sample, db)
        for phase in ("cold", "after_records"):
            log(f"  to the offer, {phase}: {offer[phase]['offered']} of {offer[phase]['messages']} offered, p50 "
                f"{offer[phase]['time_to_offer_s']['p50']} s ({offer[phase]['predicted']} predicted)")
        return {"to_inbox": inbox, "to_offer": offer, "model": server.model,
                "loadavg": [round(x, 2) for x in os.getloadavg()]}
    finally:
        if app is not None:
            app.stop()
        server.stop()


def table(result: dict[str, Any]) -> list[str]:
    """The results page's handoff table (bench/report.py)."""
    inbox, offer = result["to_inbox"], result["to_offer"]

    def cell(q: dict[str, Any], key: str) -> str:
        return "n/a" if q.get(key) is None else f"{q[key]:.2f}"

    lines = ["| handoff (bench/handoff.py) | n | p50 s | p95 s |", "|---|---|---|---|",
             f"| chat \"talk to a human\" until the agent inbox lists it | {inbox['shown']} of {inbox['sessions']} | "
             f"{cell(inbox['shown_after_s'], 'p50')} | {cell(inbox['shown_after_s'], 'p95')} |"]
    for phase, label in (("cold", "while the first answers fill the records"), ("after_records", "after them")):
        p = offer[phase]
        lines.append(f"| out-of-scope message until the offer of a person, {label} ({p['predicted']} predicted) | "
                     f"{p['offered']} of {p['messages']} offered | {cell(p['time_to_offer_s'], 'p50')} | "
                     f"{cell(p['time_to_offer_s'], 'p95')} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handoff", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--messages", type=int, default=16)
    parser.add_argument("--predict-sample", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "handoff.json")
    args = parser.parse_args(argv)
    import tempfile

    from bench.common import isolate
    from core.settings import get_settings
    from tandem.processes import free_port

    homes = isolate(Path(tempfile.mkdtemp(prefix="tandem-handoff-")), free_port())
    result = run(get_settings(), args.sessions, args.messages, args.predict_sample, homes,
                 lambda m: print(m, flush=True))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
