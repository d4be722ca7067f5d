"""Speed figures in responses: TabbyAPI's rates in ``usage``, llama.cpp's ``timings`` when asked."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tabby_fixed.engine.base import Finish
from tabby_fixed.server.usage import INDETERMINATE, timings, usage

MESSAGES = [{"role": "user", "content": "RAW:one two three four five"}]


def test_usage_carries_tabbyapi_rates(client: openai.OpenAI):
    reply = client.chat.completions.create(model="tester", messages=MESSAGES)
    used = reply.usage.model_dump()
    assert used["completion_time"] > 0
    assert used["completion_tokens_per_sec"] == round(used["completion_tokens"] / used["completion_time"], 2)
    assert used["prompt_time"] == 0 and used["prompt_tokens_per_sec"] == INDETERMINATE, \
        "the scripted engine computes no prompt: TabbyAPI's word for a rate without a time"
    assert "timings" not in reply.model_dump()


def test_timings_when_asked(http: httpx.Client):
    body = http.post("/v1/chat/completions", json={"model": "tester", "messages": MESSAGES, "timings": True}).json()
    used, timed = body["usage"], body["timings"]
    assert timed["predicted_n"] == used["completion_tokens"] and timed["prompt_n"] == used["prompt_tokens"]
    assert timed["predicted_ms"] == pytest.approx(used["completion_time"] * 1000)
    assert timed["predicted_per_second"] == pytest.approx(used["completion_tokens"] / used["completion_time"])
    assert timed["prompt_per_second"] is None, "no prompt time: no rate, rather than a division by zero"
    assert timed["cache_n"] == 0 and timed["draft_n"] == 0 and timed["draft_n_accepted"] == 0


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_streams_end_with_timings_when_asked(http: httpx.Client, path: str):
    """No ``include_usage`` needed: asking for timings brings the closing usage chunk, which carries them."""
    body = {"model": "tester", "stream": True, "timings": True,
            **({"messages": MESSAGES} if "chat" in path else {"prompt": "RAW:x"})}
    with http.stream("POST", path, json=body) as reply:
        chunks = [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: {")]
    last = chunks[-1]
    assert last["choices"] == [] and last["timings"]["predicted_n"] == last["usage"]["completion_tokens"] > 0
    assert all("timings" not in chunk for chunk in chunks[:-1])


def test_rates_count_computed_prompt_tokens_and_every_choice():
    """The prompt rate leaves out cached tokens (they cost nothing); choices ran side by side, so
    their tokens count over the longest one's time."""
    finishes = [Finish("stop", 1000, 30, cached_tokens=600, prompt_seconds=0.5, completion_seconds=1.0,
                       accepted_draft_tokens=20, rejected_draft_tokens=5),
                Finish("length", 1000, 50, cached_tokens=600, prompt_seconds=0.5, completion_seconds=2.0)]
    used = usage(finishes)
    assert used["prompt_tokens_per_sec"] == 800.0 and used["completion_tokens_per_sec"] == 40.0
    assert used["total_tokens"] == 1080 and used["total_time"] == 2.5
    timed = timings(finishes)
    assert timed["prompt_n"] == 400 and timed["cache_n"] == 600 and timed["prompt_per_token_ms"] == 1.25
    assert timed["predicted_n"] == 80 and timed["predicted_per_token_ms"] == 25.0
    assert timed["draft_n"] == 25 and timed["draft_n_accepted"] == 20
