"""What the chat shows around an answer: the route badge, 'why this route', and the attachment preamble."""

from __future__ import annotations

from app.media import Extraction
from app.ui import _files_of, attachments_preamble, route_badge
from chains.schema import ChatResponse, Source


def _response(**overrides) -> ChatResponse:
    values = dict(request_id="r1", route="small", answer="ok", latency_ms={"total": 41.6},
                  sources=[Source(answer_id="a", title="Returns <policy>", score=0.9)],
                  reasons=["router: p_llm 0.21 < tau 0.5"], scores={"p_llm": 0.2104},
                  trace=[{"stage": "cache", "decision": "miss", "detail": {"entries": 3}}])
    return ChatResponse(**{**values, **overrides})


def test_badge_names_route_latency_sources_and_escapes_titles():
    badge = route_badge(_response())
    assert "route: small · not degraded · 42 ms · sources: Returns &lt;policy&gt;" in badge
    assert "<policy>" not in badge and 'class="route-badge"' in badge


def test_why_is_one_customer_line_without_reasons_trace_or_scores():
    badge = route_badge(_response())
    why = badge[badge.index("<details"):]
    assert "<summary>why this route</summary>" in why and "answered from our help center" in why
    assert "p_llm" not in why and "tau" not in why and "cache: miss" not in why and "entries" not in why


def test_an_llm_route_answer_that_is_not_the_assistants_text_says_what_it_is():
    offered = route_badge(_response(route="llm", served="human_offer", sources=[]))
    assert "route: llm · served: human offer · not degraded" in offered
    assert "could not answer this reliably" in offered and "written by our assistant" not in offered
    kept = route_badge(_response(route="llm", served="draft"))
    assert "served: draft" in kept and "answered from our help center" in kept
    written = route_badge(_response(route="llm", served="llm"))
    assert "served:" not in written and "written by our assistant from our help center" in written
    assert _response(route="llm", served="human_offer").badge()["served"] == "human_offer"


def test_degraded_and_fallback_are_visible():
    badge = route_badge(_response(route="small", degraded=True, fallback=True))
    assert "route: small · degraded · fallback" in badge and 'class="route-badge degraded"' in badge


def test_preamble_quotes_what_was_read_and_heard():
    extraction = Extraction(texts=["ORDER 1", "hello"], read=["ORDER 1"], heard=["hello"], kinds={"image", "audio"})
    text = attachments_preamble(extraction, "")
    assert text.index("I read:* “ORDER 1”") < text.index("I heard:* “hello”")


def test_preamble_warns_about_bad_files_only_when_something_else_is_answered():
    failed = Extraction(errors=["x.png looks damaged"], kinds={"image"})
    assert attachments_preamble(failed, "") == ""  # the service's answer is that error already
    assert "x.png looks damaged" in attachments_preamble(failed, "where is my order")


def test_message_shapes_from_clients():
    assert _files_of({"text": "hi", "files": [{"path": "/tmp/a.png"}, "/tmp/b.wav"]}) == ("hi", ["/tmp/a.png",
                                                                                              "/tmp/b.wav"])
    assert _files_of("plain text") == ("plain text", [])
    assert _files_of(None) == ("", [])
