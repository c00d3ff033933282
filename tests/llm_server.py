"""Pytest fixtures for a real `transformers serve` SmolLM2 server (import them into conftest.py).

``llm_server_process`` starts one server per test session on a free port and points TANDEM_LLM_URL at it.
``llm_server`` is what tests ask for: it hands out that server and starts it again first if an earlier
test killed it (fault tests do), so every test begins with a live endpoint.
"""

from __future__ import annotations

import os

import pytest

START_TIMEOUT_S = 240  # a busy 2-core machine needs far longer than the ~10 s of an idle one


@pytest.fixture(scope="session")
def llm_server_process(tandem_home):
    from chains.llm.client import reset_llm_client
    from chains.llm.server import LLMServer, free_port
    from tandem.settings import reset_settings

    previous = os.environ.get("TANDEM_LLM_URL")
    port = free_port()
    os.environ["TANDEM_LLM_URL"] = f"http://127.0.0.1:{port}/v1"
    reset_settings()
    reset_llm_client()
    server = LLMServer(port=port).start(timeout=START_TIMEOUT_S)
    yield server
    server.stop()
    if previous is None:
        os.environ.pop("TANDEM_LLM_URL", None)
    else:
        os.environ["TANDEM_LLM_URL"] = previous
    reset_settings()
    reset_llm_client()


@pytest.fixture
def llm_server(llm_server_process):
    from tandem.settings import reset_settings

    if not llm_server_process.alive():
        llm_server_process.start(timeout=START_TIMEOUT_S)
    os.environ["TANDEM_LLM_URL"] = llm_server_process.url
    reset_settings()
    return llm_server_process
