"""The real HTTP APIs in-process (FastAPI's TestClient) over a runtime the test built: no port, no Gradio."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi.testclient import TestClient


@contextmanager
def api_client(settings, runtime=None) -> Iterator[TestClient]:
    from app.server import create_api

    app = create_api(settings, runtime_factory=(lambda: runtime) if runtime is not None else None, warm=False)
    with TestClient(app) as client:
        yield client
