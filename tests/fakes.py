"""FAKES, for what a real server cannot be made to do on demand. Named as such wherever they are used.

``ScriptedOpenAIServer`` speaks OpenAI's Chat Completions (streamed and not) and answers with the texts a test
scripts: invented links and prices, an answer cut at the token limit, repeated lines. ``FaultyOpenAIServer``
answers HTTP 500 or a stream that is not JSON. The real vLLM server is used for everything else
(tests/llm_server.py).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _LocalHTTPServer:
    """A threaded HTTP server on a free loopback port, used as a context manager; ``url`` is its /v1 root."""

    def _listen(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _QuietHandler(BaseHTTPRequestHandler):
    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep pytest output clean
        pass


class ScriptedOpenAIServer(_LocalHTTPServer):
    """A FAKE OpenAI-compatible endpoint: each chat completion returns the next scripted (text, finish_reason)."""

    def __init__(self) -> None:
        self.script: deque[tuple[str, str]] = deque()
        self.requests: list[dict] = []
        server = self

        class Handler(_QuietHandler):
            def do_GET(self):  # noqa: N802 (http.server naming)
                body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode()
                self._send(200, "application/json", body)

            def do_POST(self):  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                server.requests.append(request)
                text, finish = server.script.popleft() if server.script else ("", "stop")
                if request.get("stream"):
                    try:
                        self._stream(text, finish)
                    except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: as vLLM aborts
                        pass
                    return
                body = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "scripted",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": finish}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": len(text.split()),
                                  "total_tokens": 50 + len(text.split())}}
                self._send(200, "application/json", json.dumps(body).encode())

            def _stream(self, text: str, finish: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                words = [w + " " for w in text.split(" ")]
                for word in words:
                    self._event({"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]})
                self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                self._event({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": len(words),
                                                      "total_tokens": 50 + len(words)}})
                self.wfile.write(b"data: [DONE]\n\n")

            def _event(self, chunk: dict) -> None:
                payload = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                           "model": "scripted", **chunk}
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

        self._listen(Handler)

    def say(self, text: str, finish: str = "stop") -> ScriptedOpenAIServer:
        self.script.append((text, finish))
        return self



class FaultyOpenAIServer(_LocalHTTPServer):
    """A FAKE OpenAI-compatible endpoint for faults a real server cannot be made to produce on demand.

    ``mode="500"`` answers every `/v1/chat/completions` with HTTP 500 and a JSON error;
    ``mode="malformed"`` answers 200 with a server-sent-event stream whose data is not JSON.
    """

    def __init__(self, mode: str):
        self.mode = mode
        self.hits = 0
        server = self

        class Handler(_QuietHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                self.rfile.read(int(self.headers.get("content-length") or 0))
                server.hits += 1
                if server.mode == "500":
                    body = json.dumps({"error": {"message": "CUDA out of memory", "type": "server_error"}}).encode()
                    self._send(500, "application/json", body)
                else:
                    self._send(200, "text/event-stream",
                               b'data: {"id": "x", "choices": [{"delta": {"content": "hel\n\ndata: {not json at all\n\n')

        self._listen(Handler)
