"""The real HTTP APIs in-process (FastAPI's TestClient) over a runtime the test built: no port, no Gradio."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi.testclient import TestClient


@contextmanager
def api_client(settings, runtime=None) -> Iterator[TestClient]:
    from app.server import create_api

    app = create_api(settings, runtime_factory=(lambda: runtime) if runtime is not None else None, warm=False)
    # The client's address is loopback, as a local caller's is (TestClient's default, "testclient", is no address).
    with TestClient(app, client=("127.0.0.1", 50000)) as client:
        yield client


@contextmanager
def serve_api(settings, runtime) -> Iterator[str]:
    """The APIs on a real port (uvicorn in a thread), for clients that need a URL (the openai SDK)."""
    import threading
    import time

    import httpx
    import uvicorn

    from app.server import create_api
    from tandem.processes import free_port

    port = free_port()
    app = create_api(settings, runtime_factory=lambda: runtime, warm=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).json().get("ready"):
                break
        except (httpx.HTTPError, ValueError):
            time.sleep(0.1)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
