"""Advice on products with the real LLM (SmolLM2 on the vLLM CPU build): the candidates' cards come first, the model
writes from their records, and whatever text is served makes no product claim that no record backs. Real parts:
MiniLM, Chroma, SQLite, the demo knowledge base, the shared test feed."""

from __future__ import annotations

import pytest

from catalog.advice import advice
from catalog.live import LiveCatalog
from chains.schema import ChatRequest, Decided, Revised
from storage.tables import RequestLog
from tests.catalog.shop import write_feed
from tests.conftest import fresh_db, make_runtime

pytestmark = pytest.mark.slow

FAMILY = "Which kettle would you recommend for a family of five?"


@pytest.fixture
def advised(llm_settings, demo_kb, encoder, tmp_path):
    db = fresh_db(tmp_path)
    live = LiveCatalog(db, encoder, chroma_path=tmp_path / "chroma")
    live.open().ingest(write_feed(tmp_path / "feed.tsv"))
    runtime = make_runtime(llm_settings, db, demo_kb, use_llm=True, catalog=live)
    yield runtime, live
    runtime.close()


def test_an_advice_message_gets_the_candidates_cards_first_and_no_unmatched_product_claim(advised):
    runtime, live = advised
    items = list(runtime.service.stream(ChatRequest(message=FAMILY, user_id="dave", session_id="advice-1",
                                                    channel="api", temperature=0.0)))
    final = items[-1]
    assert final.route in ("llm", "small"), final.reasons  # small only when the engine failed (a fallback)
    assert final.intent == "advice" and [c["id"] for c in final.products] == ["K1", "K2"]
    decided = next(i for i in items if isinstance(i, Decided))  # the cards travel with the route, before any text
    assert [c["id"] for c in decided.products] == ["K1", "K2"] and decided.filters
    assert items.index(decided) < min(n for n, i in enumerate(items) if isinstance(i, str))
    shown = [i for i in items if isinstance(i, str)]
    assert shown[0].startswith("**Filters:** kettle\n\n1. **Family Electric Kettle 2.2 L** — $59.90 · in stock\n"
                               "2. **Travel Kettle 0.8 L** — $24.90 · in stock")  # before any LLM text
    assert final.answer.startswith(shown[0].strip())
    assert all(r.text.startswith(shown[0].strip()) for r in items if isinstance(r, Revised))  # cards kept
    step = next(s for s in final.trace if s["stage"] == "catalog")
    assert step["detail"]["kind"] == "advice" and step["detail"]["products"] == ["K1", "K2"]
    # The prompt held the candidates' records, not help-center text
    with runtime.db.session() as session:
        logged = session.get(RequestLog, final.request_id)
    assert logged.intent == "advice" and logged.model == "smollm2", (logged.model, logged.reasons)
    prompt = runtime.chain.llm_request(_turn_like(runtime, final))[-1]["content"]
    assert "Family Electric Kettle 2.2 L: price $59.90" in prompt and "Help-center context" not in prompt
    # Whatever was served: the advice passed the claims check, or the cards stand with the honest line
    check = advice(live.current(), FAMILY)
    assert check is not None and check.claims.unmatched(final.answer) == [], (final.answer, logged.rejected_text)
    if final.served == "candidates":  # the text failed its checks (or the engine failed): the cards stand, said so
        assert logged.findings or final.fallback, logged.findings
        assert "I could not write advice on them that I could check" in final.answer
    else:
        assert final.served == "llm" and not logged.findings, (final.served, logged.findings)
    assert not any(step["stage"] == "remember" for step in final.trace)  # advice is never cached


def _turn_like(runtime, response):
    """The turn as the LLM tier saw it, rebuilt for llm_request: the message, its advice, its plan."""
    from chains.turn import Turn
    from core.policy import Thresholds

    turn = Turn(request=ChatRequest(message=FAMILY), thresholds=Thresholds.defaults(runtime.settings), text=FAMILY,
                query=FAMILY, plan="llm")
    turn.advice = advice(runtime.catalog.current(), FAMILY)
    return turn
