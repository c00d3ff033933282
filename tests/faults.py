"""Fault injection in front of a REAL server: ``DelayProxy`` forwards TCP to it (the real vLLM answers) but holds
each response back for ``delay_s`` first, which is how a slow LLM looks from the app; ``close()`` turns the port
off, which is how an outage looks (connection refused). Nothing here answers on the server's behalf.
"""

from __future__ import annotations

import socket
import threading
import time


class DelayProxy:
    def __init__(self, upstream_host: str, upstream_port: int, delay_s: float = 0.0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.delay_s = delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self._closed.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=60)
        except OSError:
            client.close()
            return
        first_reply = threading.Event()

        def pipe(source: socket.socket, sink: socket.socket, delayed: bool) -> None:
            try:
                while data := source.recv(65536):
                    if delayed and not first_reply.is_set():
                        time.sleep(self.delay_s)
                        first_reply.set()
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    try:
                        end.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pipe, args=(client, upstream, False), daemon=True).start()
        pipe(upstream, client, True)
        client.close()
        upstream.close()
