"""Pytest fixtures for the real LLM server: vLLM (the CPU build), started once per test session.

``llm_server_process`` starts it on a free port and points TANDEM_LLM_URL at it (apps the tests start inherit
that). ``llm_server`` is what tests ask for: it hands out that server and starts it again first if an earlier
test killed it (fault tests do), so every test begins with a live endpoint; fixtures of a wider scope that start
apps on it call :func:`live` for the same promise.
"""

from __future__ import annotations

import os

import pytest

START_TIMEOUT_S = 300  # about 30 s idle; a busy 2-core machine needs far longer
# Four sequences at a time: enough for every test, and a queue forms inside vLLM as soon as a test sends more,
# which the load-gate tests need (the default, 256, would batch everything on 2 cores and never queue).
TEST_VLLM_ARGS = "--enforce-eager --scheduling-policy priority --enable-prefix-caching --max-num-seqs 4"
# Two more names of the same engine, so that score bands can route to two LLM endpoints of the real server.
BAND_ALIASES = ("tandem-base", "tandem-expert")


@pytest.fixture(scope="session")
def llm_server_process(tandem_home):
    from core.settings import get_settings, reset_settings
    from tandem.llm_server import LLMServer
    from tandem.processes import free_port

    previous = os.environ.get("TANDEM_LLM_URL")
    os.environ["TANDEM_LLM_URL"] = f"http://127.0.0.1:{free_port()}/v1"
    os.environ["TANDEM_VLLM_ARGS"] = TEST_VLLM_ARGS
    os.environ["TANDEM_LLM_ALIASES"] = ",".join(BAND_ALIASES)
    reset_settings()
    server = LLMServer(get_settings()).start(timeout=START_TIMEOUT_S)
    server.warm_up()  # as `make demo` does: the engine's first generation is slow, and no test should pay for it
    yield server
    server.stop()
    if previous is None:
        os.environ.pop("TANDEM_LLM_URL", None)
    else:
        os.environ["TANDEM_LLM_URL"] = previous
    reset_settings()


def live(server):
    """``server``, started again (and warmed up, like the first start) if an earlier test killed it."""
    if not server.alive():
        server.start(timeout=START_TIMEOUT_S)
        server.warm_up()  # a restarted engine's first generation is as slow as a new one's
    return server


@pytest.fixture
def llm_server(llm_server_process):
    return live(llm_server_process)


@pytest.fixture
def killed_llm_server(llm_server_process):
    """The session's server, SIGKILLed: a test of what a dead endpoint does. Left down for the next test that asks
    for ``llm_server`` to start again. When an earlier test already killed it, it stays down (the endpoint is the
    same dead one); starting it only to kill it again would cost a vLLM start (about 45 s on 2 AVX2 cores)."""
    if llm_server_process.alive():
        llm_server_process.kill()
    return llm_server_process


@pytest.fixture
def llm_settings(llm_server):
    """Settings whose TANDEM_LLM_URL is the live server (fast failure: one retry, short timeouts)."""
    from core.settings import get_settings

    return get_settings().model_copy(update={"llm_url": llm_server.url})


@pytest.fixture
def llm_client(llm_settings):
    from chains.llm.client import LLMClient

    client = LLMClient(llm_settings)
    yield client
    client.close()
