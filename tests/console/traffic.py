"""Console test data: real traffic driven through the service (every route the chain writes), plus a few rows
built by hand for edge cases the chain cannot be made to write on demand (named as such)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from chains.schema import ChatRequest, ChatResponse
from storage.tables import RequestLog

SMALL = ["How do I reset my password?", "how long does standard shipping take", "can I pay with paypal",
         "how do I start a return", "do you ship internationally", "where can I find the manual for my lamp",
         "how long is the warranty", "can I change my order", "which carriers do you use", "how do gift cards work",
         "退货政策是什么", "how do I unsubscribe from the newsletter"]
# Damaged or missing? The router keeps it on the small tier, but trusts the draft too little: the LLM rewrites it.
# A weak draft of two close answers: the question "which one?" at the default margin, an LLM rewrite with it off
REWRITE = ["the box came open and something is missing"]
LLM = ["Can you recommend a gift for my dad who likes hiking, around 80 dollars?",
       "Write a short poem about a parcel that got lost", "What is the best blender for smoothies in your shop?"]
# Sent while the engine is saturated: different requests, so no cached LLM answer can serve them.
LLM_UNDER_LOAD = ["Which of your coffee machines would suit a small office of six people?",
                  "Compare your two cheapest vacuum cleaners for a flat with a cat"]
TOOL = [("where is my order NW-104233?", "alice"), ("status of order NW-106112 please", "bob"),
        ("where is my order NW-104233?", "bob")]  # the last is not bob's: the tool must not show it
GUARD = ["", "x" * 5000, "\x00\x01\x02"]
# Markdown a customer typed: the console must show it as text, never render the link or fetch the image.
MARKDOWN = "where is my refund ![pixel](http://evil.example/p.png) [click me](http://evil.example/x)"


@dataclass
class Traffic:
    responses: list[ChatResponse] = field(default_factory=list)

    def routes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for response in self.responses:
            key = "degraded" if response.degraded else response.route
            counts[key] = counts.get(key, 0) + 1
        return counts

    def of(self, route: str) -> list[ChatResponse]:
        return [r for r in self.responses if r.route == route]


def drive(runtime, saturate=None, seed: int = 7) -> Traffic:
    """Send a realistic mix through ``runtime.service``: small, cache (repeats), tool, guard, llm, and degraded
    (LLM-bound messages while ``saturate`` keeps the engine's queue full)."""
    rng = random.Random(seed)
    service = runtime.service
    traffic = Traffic()

    def send(text: str, user: str = "", session: str = "") -> ChatResponse:
        response = service.answer(ChatRequest(message=text, user_id=user or f"u{rng.randint(1, 20):02d}",
                                              session_id=session or f"s{rng.randint(1, 30):02d}", channel="ui"))
        traffic.responses.append(response)
        return response

    for text in SMALL + rng.sample(SMALL, 6):  # the repeats are cache hits
        send(text)
    for text, user in TOOL:
        send(text, user=user)
    for text in GUARD:
        send(text)
    send(MARKDOWN)
    for text in REWRITE + LLM:
        send(text)
    if saturate is not None:
        with saturate():
            for text in LLM_UNDER_LOAD:
                send(text)
    rated = [r for r in traffic.responses if r.route in ("small", "llm")]
    for index, response in enumerate(rated[:8]):
        service.feedback(response.request_id, -1 if index % 3 == 0 else 1,
                         "wrong answer, call me on +44 20 7946 0958" if index == 0 else "")
    service.handoff(rated[0].session_id, "alice", rated[0].request_id, "please call alice@example.com back")
    return traffic


def edge_case_rows(count: int = 3) -> list[RequestLog]:
    """Hand-built rows for what real traffic does not produce on demand: requests from days ago (time ranges)."""
    old = datetime.now(UTC) - timedelta(days=3)
    return [RequestLog(created_at=old - timedelta(minutes=i), session_id="old", channel="cli", text="old question",
                       answer="old answer", route="small", total_ms=20.0, latency_ms={"total": 20.0},
                       kb_version="old", settings_version=1) for i in range(count)]


def drive_in_this_home() -> Traffic:
    """Real traffic into $TANDEM_HOME's own database and demo KB, without an LLM (for a console started apart)."""
    from chains.bootstrap import bootstrap
    from chains.runtime import build_runtime

    runtime = build_runtime(use_llm=False)
    for _ in bootstrap(runtime.settings, runtime.kb, db=runtime.db):
        pass
    try:
        return drive(runtime)
    finally:
        runtime.close()
