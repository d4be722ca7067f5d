"""The wire itself: SSE framing, pings, disconnects, and many streams at once."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from tests.server.conftest import API_KEY, serve
from tests.toolcalls.test_seeds import TOOLS, call

CHAT = {"model": "tester", "tools": TOOLS, "stream": True, "stream_options": {"include_usage": True}}


def frames(body: str) -> list[str]:
    assert body.endswith("\r\n\r\n")
    return body[:-4].split("\r\n\r\n")


def test_sse_framing(http: httpx.Client):
    text = "Sure.\n" + call("write_file", ("path", "a"), ("content", "b"))
    with http.stream("POST", "/v1/chat/completions",
                     json={**CHAT, "messages": [{"role": "user", "content": "RAW:" + text}]}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store" and response.headers["x-accel-buffering"] == "no"
        body = response.read().decode()
    events = frames(body)
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert len({c["id"] for c in chunks}) == 1 and len({c["created"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "tester" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}
    first_call = next(c for c in chunks if "tool_calls" in c["choices"][0]["delta"])
    part = first_call["choices"][0]["delta"]["tool_calls"][0]
    assert part["function"] == {"name": "write_file", "arguments": ""} and part["index"] == 0
    assert part["id"].startswith("call_") and part["type"] == "function"


def test_pings_while_the_engine_is_silent(workspace):
    for server in serve(workspace, "slow", "--sse-ping-interval", "0.01"):
        with httpx.stream("POST", server.v1 + "/chat/completions", headers={"authorization": f"Bearer {API_KEY}"},
                          json={"model": "slow", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                                "max_tokens": 5}, timeout=30) as response:
            body = response.read().decode()
        assert any(e.startswith(": ping - ") for e in frames(body))
        assert frames(body)[-1] == "data: [DONE]"


def test_error_after_the_stream_started_is_an_error_event(client: openai.OpenAI, http: httpx.Client):
    with http.stream("POST", "/v1/chat/completions",
                     json={**CHAT, "messages": [{"role": "user", "content": "CRASH:partial"}]}) as response:
        body = response.read().decode()
    events = frames(body)
    streamed = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert streamed == "partial", "what was generated before the failure is delivered"
    error = json.loads(events[-1][6:])["error"]
    assert "injected fault" in error["message"] and error["type"] == "server_error"
    assert "data: [DONE]" not in events
    with pytest.raises(openai.APIError, match="injected fault"):
        list(client.chat.completions.create(model="tester", messages=[{"role": "user", "content": "CRASH:x"}],
                                            stream=True))


def test_32_concurrent_streams_match_their_non_streaming_answers(server, client: openai.OpenAI):
    texts = [f"Answer {i}: " + "word " * (i % 7) + call("write_file", ("path", f"f{i}.py"), ("content", f"x = {i}\n"))
             for i in range(32)]
    expected = [client.chat.completions.create(model="tester", messages=[{"role": "user", "content": "RAW:" + t}],
                                               tools=TOOLS).choices[0].message for t in texts]

    async def one(async_client: openai.AsyncOpenAI, text: str) -> tuple[str, list[tuple[str, str]]]:
        async with async_client.chat.completions.stream(
                model="tester", messages=[{"role": "user", "content": "RAW:" + text}], tools=TOOLS) as stream:
            final = await stream.get_final_completion()
        message = final.choices[0].message
        return message.content, [(c.function.name, c.function.arguments) for c in message.tool_calls]

    async def all_streams() -> list:
        async_client = openai.AsyncOpenAI(base_url=server.v1, api_key=API_KEY, max_retries=0, timeout=60)
        try:
            return await asyncio.gather(*(one(async_client, t) for t in texts))
        finally:
            await async_client.close()

    results = asyncio.run(all_streams())
    assert results == [(m.content, [(c.function.name, c.function.arguments) for c in m.tool_calls]) for m in expected]
