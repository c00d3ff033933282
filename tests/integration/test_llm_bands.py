"""Score bands as configuration, against the real vLLM server: the one engine answers to two more names
(tests/llm_server.py BAND_ALIASES), reached at two URLs, and each band of the router's score goes to its own
endpoint and model (issue 38: the seeds' layers become configuration)."""

from __future__ import annotations

import pytest

from chains.llm.client import LLMClient, LLMResult
from core.policy import Thresholds
from tests.llm_server import BAND_ALIASES

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Where is my order?"}]


def test_each_score_band_is_answered_by_its_own_endpoint_and_model_of_the_real_engine(llm_settings, llm_server):
    base_name, expert_name = BAND_ALIASES
    port = llm_server.port
    bands = [{"name": "base", "base_url": f"http://127.0.0.1:{port}/v1", "model": base_name, "min_score": 0.0},
             {"name": "expert", "base_url": f"http://localhost:{port}/v1", "model": expert_name, "min_score": 0.9}]
    policy = Thresholds.defaults(llm_settings).model_copy(update={"tiers": bands})
    client = LLMClient(llm_settings, policy=lambda: policy)
    try:
        answered = {score: [item for item in client.stream(MESSAGES, score=score, max_tokens=4, temperature=0.0)
                            if isinstance(item, LLMResult)][0] for score in (0.2, 0.95)}
        endpoints = {t["name"]: t["base_url"] for t in client.status()["tiers"]}
    finally:
        client.close()
    assert (answered[0.2].tier, answered[0.2].model) == ("base", base_name)
    assert (answered[0.95].tier, answered[0.95].model) == ("expert", expert_name)
    assert all(result.completion_tokens > 0 for result in answered.values())  # the engine generated for both names
    assert endpoints == {"base": bands[0]["base_url"], "expert": bands[1]["base_url"]}
