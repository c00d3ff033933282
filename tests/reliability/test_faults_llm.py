"""LLM faults: server killed, too slow, answering 500, answering malformed JSON.

Expected (SECURITY.md, fault model): every message is still answered, from the knowledge base, with the
honest fallback notice (route small, fallback true); the circuit breaker opens so later messages do not
wait on a dead endpoint; and every message leaves exactly one request row.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chains.schema import ChatRequest
from chains.tiers import FALLBACK_NOTICE
from tests.reliability.conftest import make_service, session_rows

pytestmark = pytest.mark.slow

# Open-ended requests the router sends to the LLM (or to an LLM rewrite) rather than the KB draft.
LLM_BOUND = ("Write me a short poem about my parcel that is late and the rain in Paris",
             "Can you compare your return policy with Amazon's and explain which is fairer and why?",
             "My grandmother wants to know if your mugs are microwave safe and how to stack them",
             "Explain in detail why my refund might take longer during holidays than other weeks",
             "I am planning a surprise party; which of your products make good gifts under 50 dollars?")


class FaultyOpenAIServer:
    """A FAKE OpenAI-compatible endpoint for faults a real server cannot be made to produce on demand.

    ``mode="500"`` answers every `/v1/chat/completions` with HTTP 500 and a JSON error;
    ``mode="malformed"`` answers 200 with a server-sent-event stream whose data is not JSON.
    """

    def __init__(self, mode: str):
        self.mode = mode
        self.hits = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                self.rfile.read(int(self.headers.get("content-length") or 0))
                server.hits += 1
                if server.mode == "500":
                    body = json.dumps({"error": {"message": "CUDA out of memory", "type": "server_error"}}).encode()
                    self.send_response(500)
                    self.send_header("content-type", "application/json")
                else:
                    body = b'data: {"id": "x", "choices": [{"delta": {"content": "hel\n\ndata: {not json at all\n\n'
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # keep pytest output clean
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FaultyOpenAIServer:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _run_fault(settings, db, small_kb, url: str, timeout_s: float = 5.0) -> tuple[list, dict]:
    from chains.llm.client import LLMClient

    faulty = settings.model_copy(update={"llm_url": url, "llm_retries": 1, "llm_timeout_s": timeout_s,
                                         "llm_model": "smollm2"})
    client = LLMClient(faulty, poll_metrics=False)
    service = make_service(faulty, db, small_kb, client)
    service.policy.save({"route_threshold": 0.0}, "test", "every message to the LLM")
    try:
        before = session_rows(db)
        responses = [service.answer(ChatRequest(message=m, channel="api")) for m in LLM_BOUND]
        added = session_rows(db) - before
        status = client.status()
    finally:
        service.policy.save({"route_threshold": settings.route_threshold}, "test", "default")
        client.close()
    for response in responses:
        assert response.route == "small" and response.fallback, (response.route, response.reasons)
        assert response.answer.startswith(FALLBACK_NOTICE)
    assert added == len(LLM_BOUND), f"{len(LLM_BOUND)} sent, {added} rows"
    assert status["breaker"] == "open", status["breaker"]
    return responses, status


@pytest.mark.parametrize("mode", ["500", "malformed"])
def test_llm_answering_garbage_falls_back_and_opens_the_breaker(settings, db, small_kb, mode):
    with FaultyOpenAIServer(mode) as faulty:
        responses, _ = _run_fault(settings, db, small_kb, faulty.url)
    # The breaker stops the calls: fewer server hits than messages x tries.
    assert 0 < faulty.hits < len(LLM_BOUND) * 2
    assert any("breaker open" in r.reasons[-1] for r in responses)


def test_llm_too_slow_times_out_and_falls_back(settings, db, small_kb, llm_server):
    responses, _ = _run_fault(settings, db, small_kb, llm_server.url, timeout_s=0.01)
    assert "timeout" in responses[0].reasons[-1]


def test_llm_server_killed_falls_back(settings, db, small_kb, llm_server):
    llm_server.kill()  # the llm_server fixture restarts it for the next test that needs it
    responses, _ = _run_fault(settings, db, small_kb, llm_server.url)
    assert "connection" in responses[0].reasons[-1]
