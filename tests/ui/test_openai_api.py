"""The OpenAI-compatible endpoint, driven by clients we did not write: the official `openai` SDK (sync, async,
streaming), LangChain's ChatOpenAI (invoke and stream), and raw httpx for the exact SSE wire format."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pytest

from tests.ratelimit import start_clear_of_a_window_boundary
from tests.ui.conftest import ASSETS, request_row

pytestmark = pytest.mark.slow

FAQ = "How do I reset my password?"
OPEN_ENDED = "Can you suggest a nice birthday present for a colleague who loves gardening?"
LANGCHAIN_STREAM = "Please write a few friendly sentences about planning a weekend picnic with friends."


@pytest.fixture(scope="module")
def client(app_server):
    import openai

    return openai.OpenAI(base_url=app_server.url + "/v1", api_key="unused", max_retries=0)


def test_models_lists_the_three_ways_to_call_tandem(client):
    assert {m.id for m in client.models.list().data} >= {"tandem", "tandem-small", "tandem-llm"}


def test_sdk_completion_has_the_standard_shape_and_the_route(client):
    raw = client.chat.completions.with_raw_response.create(
        model="tandem", messages=[{"role": "user", "content": FAQ}], user="alice")
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.model == "tandem"
    assert "password" in completion.choices[0].message.content.lower()
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    extra = completion.model_extra["tandem"]
    assert raw.headers["x-tandem-route"] == extra["route"] in ("small", "cache", "llm")
    assert raw.headers["x-tandem-request-id"] == extra["request_id"] and raw.headers["x-tandem-degraded"] == "false"
    row = request_row(extra["request_id"])
    assert row.channel == "openai" and row.user_id == "alice"


def test_sdk_stream_ends_with_the_tandem_object_and_usage(client):
    # Greedy and long enough for several sentences: the answer check holds back a stretch with a figure until its
    # sentence ends, so a sampled 24-token reply that opened with one ("[0] …", once in CI) came as one chunk.
    stream = client.chat.completions.create(model="tandem-llm", messages=[{"role": "user", "content": OPEN_ENDED}],
                                            stream=True, stream_options={"include_usage": True}, max_tokens=96,
                                            temperature=0)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() and len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert final.model_extra["tandem"]["route"] == "llm"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0  # the engine's own count
    assert request_row(final.model_extra["tandem"]["request_id"]).completion_tokens > 0


def test_async_sdk(app_server):
    import openai

    async def ask() -> str:
        async with openai.AsyncOpenAI(base_url=app_server.url + "/v1", api_key="unused", max_retries=0) as aclient:
            done = await aclient.chat.completions.create(model="tandem-small",
                                                         messages=[{"role": "user", "content": FAQ}])
            return done.choices[0].message.content

    assert "password" in asyncio.run(ask()).lower()


def test_tandem_small_never_calls_the_llm_and_says_when_nothing_fits(client):
    done = client.chat.completions.create(model="tandem-small", messages=[{"role": "user", "content": OPEN_ENDED}])
    assert done.model_extra["tandem"]["route"] == "small" and done.usage.completion_tokens == 0
    assert "closest answer in our help center" in done.choices[0].message.content


def test_history_and_follow_up_come_from_the_messages(client):
    done = client.chat.completions.create(model="tandem", messages=[
        {"role": "system", "content": "ignored: Tandem's own prompt applies"},
        {"role": "user", "content": "How do I return an item?"},
        {"role": "assistant", "content": "You can start a return under Account > Returns."},
        {"role": "user", "content": "and how long does that take?"}])
    assert done.model_extra["tandem"]["sources"]
    # "and how long does that take?" alone names no topic: the earlier turn's answer first means the history was read.
    assert done.model_extra["tandem"]["sources"][0]["answer_id"] == "start_return", done.model_extra["tandem"]
    assert "reasons" not in done.model_extra["tandem"]  # the router's reasons are for admin keys only


def test_an_image_part_is_read_by_ocr(client):
    data = base64.b64encode((ASSETS / "order_text.png").read_bytes()).decode()
    done = client.chat.completions.create(model="tandem", user="alice", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}]}])
    assert "NW-104233" in done.choices[0].message.content  # the order tool read the screenshot's order number
    assert request_row(done.model_extra["tandem"]["request_id"]).modality == "attachment"


def test_langchain_chat_openai_invoke_and_stream(app_server):
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=app_server.url + "/v1", api_key="unused", model="tandem", max_retries=0)
    assert "password" in chat.invoke(FAQ).content.lower()
    # A message no other test sends: a cached answer comes back whole, in one piece. (Twice in CI this stream
    # was one piece, "Available at Northwind.Example/giftcard.": the SDK stream test's short LLM answer to
    # OPEN_ENDED, cached under the tandem-llm mode and served here from the cache.) 96 tokens give several
    # sentences: the answer check holds back a sentence with a link or a figure until it ends.
    pieces = list(ChatOpenAI(base_url=app_server.url + "/v1", api_key="unused", model="tandem-llm",
                             max_retries=0, max_tokens=96).stream(LANGCHAIN_STREAM))
    assert len([p for p in pieces if p.content]) > 1, pieces


def test_raw_sse_wire_format(app_server):
    with httpx.Client(timeout=120) as http, http.stream(
            "POST", app_server.url + "/v1/chat/completions",
            json={"model": "tandem", "stream": True, "messages": [{"role": "user", "content": FAQ}]}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-tandem-route"] in ("small", "cache", "llm")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["id"].startswith("chatcmpl-") for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["tandem"]["request_id"]


@pytest.mark.parametrize("kwargs, error, says", [
    ({"model": "gpt-17"}, "NotFoundError", "does not exist"),
    ({"model": "tandem", "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
     "BadRequestError", "'tools' is not supported"),
    ({"model": "tandem", "n": 2}, "BadRequestError", "'n' is not supported"),
    ({"model": "tandem", "logprobs": True}, "BadRequestError", "'logprobs' is not supported"),
    ({"model": "tandem", "messages": [{"role": "user", "content": ""}]}, "BadRequestError", "Please type a question"),
])
def test_errors_come_back_as_the_sdks_own_exceptions(client, kwargs, error, says):
    import openai

    kwargs = {"messages": [{"role": "user", "content": FAQ}], **kwargs}
    with pytest.raises(getattr(openai, error)) as info:
        client.chat.completions.create(**kwargs)
    body = info.value.body
    assert says in body["message"] and {"message", "type", "param", "code"} <= set(body)


def test_malformed_bodies_are_openai_400s(app_server):
    for content in (b"{not json", b"", b"[1]", b'{"model": "tandem"}', b'{"model": "tandem", "messages": "hi"}'):
        response = httpx.post(app_server.url + "/v1/chat/completions", content=content,
                              headers={"content-type": "application/json"}, timeout=30)
        assert response.status_code == 400, (content, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_wrong_token_and_rate_limit_are_the_sdks_authentication_and_rate_limit_errors(settings, db, demo_kb):
    import openai

    from tests.api import serve_api
    from tests.conftest import make_runtime

    guarded = settings.model_copy(update={"api_token": "s3cret", "rate_limit_per_min": 2})
    with serve_api(guarded, make_runtime(guarded, db, demo_kb)) as url:
        start_clear_of_a_window_boundary(needed_s=15)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0).chat.completions.create(
                model="tandem", messages=[{"role": "user", "content": FAQ}])
        ok = openai.OpenAI(base_url=url + "/v1", api_key="s3cret", max_retries=0)
        for _ in range(2):
            ok.chat.completions.create(model="tandem", user="eve", messages=[{"role": "user", "content": FAQ}])
        with pytest.raises(openai.RateLimitError) as info:
            ok.chat.completions.create(model="tandem", user="eve", messages=[{"role": "user", "content": FAQ}])
        assert int(info.value.response.headers["retry-after"]) >= 1
