"""What the app sends to a REAL server, read on the wire: ``RecordingProxy`` forwards TCP both ways to it (the real
vLLM answers everything) and keeps a copy of the bytes the app sent, so a test can read the request bodies the
server received (the priority asked for, the prompt's text). Nothing is changed or answered here; like
tests/faults.py, and unlike tests/fakes.py, a real server is behind it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from urllib.parse import urlparse


class RecordingProxy:
    """A TCP proxy on a free loopback port in front of ``upstream_url``; ``url`` is its /v1 root."""

    def __init__(self, upstream_url: str) -> None:
        parsed = urlparse(upstream_url)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.sent: list[bytearray] = []  # per connection, in the order opened
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def chat_bodies(self) -> list[dict]:
        """The JSON body of every POST to /v1/chat/completions (httpx frames each with Content-Length)."""
        bodies = []
        for data in map(bytes, list(self.sent)):
            while b"\r\n\r\n" in data:
                head, _, rest = data.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
                size = int(headers.get("content-length", "0"))
                body, data = rest[:size], rest[size:]
                if lines[0].startswith("POST ") and "/chat/completions" in lines[0]:
                    bodies.append(json.loads(body))
        return bodies

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream, timeout=120)
        record = bytearray()
        self.sent.append(record)

        def pipe(source: socket.socket, sink: socket.socket, copy: bytearray | None) -> None:
            try:
                while data := source.recv(65536):
                    if copy is not None:
                        copy.extend(data)
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pipe, args=(client, upstream, record), daemon=True).start()
        pipe(upstream, client, None)
        client.close()
        upstream.close()
