"""``GET /metrics`` after a known workload, parsed with prometheus_client's own parser: the values
must add up to what the responses reported, not merely be present."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.live_server import LiveServer
from tests.server.conftest import API_KEY, make_models, serve

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
CALL = "<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call>"
CUT_CALL = "<tool_call>\n<function=write_file>\n<parameter=path>\na"
NOT_A_CALL = "<tool_call>\nnot a call\n</tool_call> sorry"


def scrape(url: str, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample as {(name, sorted labels): value}."""
    reply = httpx.get(url + "/metrics", headers={"authorization": f"Bearer {API_KEY}", **headers})
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain; version=")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(reply.text) for sample in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of its own: metrics count from its start, whatever other tests send elsewhere."""
    root = tmp_path_factory.mktemp("metrics")
    make_models(root)
    yield from serve(root, "tester")


def test_metrics_add_up_to_the_workload(fresh: LiveServer):
    client = openai.OpenAI(base_url=fresh.v1, api_key=API_KEY, max_retries=0)
    usages = [client.chat.completions.create(model="tester", messages=[{"role": "user", "content": text}]).usage
              for text in ("RAW:hello there, world", "RAW:one two three")]
    with client.chat.completions.stream(model="tester", tools=TOOLS, stream_options={"include_usage": True},
                                        messages=[{"role": "user", "content": "RAW:" + CALL}]) as stream:
        usages.append(stream.get_final_completion().usage)
    for text in (CUT_CALL, NOT_A_CALL):
        usages.append(client.chat.completions.create(model="tester", tools=TOOLS,
                                                     messages=[{"role": "user", "content": "RAW:" + text}]).usage)
    assert httpx.get(fresh.v1 + "/nowhere").status_code == 404
    assert httpx.post(fresh.v1 + "/chat/completions", json={}).status_code == 401

    samples = scrape(fresh.url)
    model = {"model": "tester"}
    assert value(samples, "tabby_requests_total", route="/v1/chat/completions", method="POST", status="200") == 5
    assert value(samples, "tabby_requests_total", route="/v1/chat/completions", method="POST", status="401") == 1
    assert value(samples, "tabby_requests_total", route="unmatched", method="GET", status="404") == 1
    assert value(samples, "tabby_prompt_tokens_total", **model) == sum(u.prompt_tokens for u in usages)
    assert value(samples, "tabby_generation_tokens_total", **model) == sum(u.completion_tokens for u in usages)
    assert value(samples, "tabby_prefix_cache_hit_tokens_total", **model) == 0, "the scripted engine caches nothing"
    assert value(samples, "tabby_spec_decode_draft_tokens_total", **model) == 0
    assert value(samples, "tabby_jobs_finished_total", outcome="stop", **model) == 5
    assert value(samples, "tabby_time_to_first_token_seconds_count", **model) == 5
    gaps = value(samples, "tabby_inter_token_latency_seconds_count", **model)
    assert gaps == sum(u.completion_tokens for u in usages) - 5, "every token after a job's first is one gap"
    assert value(samples, "tabby_inter_token_latency_seconds_bucket", le="+Inf", **model) == gaps
    assert value(samples, "tabby_tool_call_outcomes_total", outcome="call", **model) == 1
    assert value(samples, "tabby_tool_call_outcomes_total", outcome="incomplete_call", **model) == 1
    assert value(samples, "tabby_tool_call_outcomes_total", outcome="text_as_content", **model) == 1
    assert value(samples, "tabby_model_load_seconds_count", **model) == 1
    assert value(samples, "tabby_model_load_seconds_sum", **model) > 0
    assert value(samples, "tabby_model_loaded", model_name="tester", max_seq_len="4096") == 1
    for name in ("tabby_jobs_running", "tabby_jobs_waiting", "tabby_kv_cache_usage_ratio",
                 "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:gpu_cache_usage_perc"):
        assert value(samples, name, model_name="tester") == 0, name
    assert value(samples, "vllm:lora_requests_info", max_lora="1", running_lora_adapters="tester",
                 waiting_lora_adapters="") > 0


def test_gauges_show_a_running_stream(tmp_path: Path):
    """While a stream runs, the router's signals say so; when the client leaves, they drop to 0."""
    make_models(tmp_path)
    for server in serve(tmp_path, "slow"):
        with httpx.Client(base_url=server.v1, headers={"authorization": f"Bearer {API_KEY}"}) as http, \
                http.stream("POST", "/chat/completions", json={
                    "model": "slow", "stream": True, "messages": [{"role": "user", "content": "go"}]}) as reply:
            lines = reply.iter_lines()
            while '"content":"tick"' not in next(lines):
                pass
            during = scrape(server.url)
        deadline = time.monotonic() + 5  # the server notices the client left at its next write
        while value(after := scrape(server.url), "tabby_jobs_running", model_name="slow") \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        for name in ("tabby_jobs_running", "vllm:num_requests_running"):
            assert value(during, name, model_name="slow") == 1
            assert value(after, name, model_name="slow") == 0
        assert value(during, "vllm:num_requests_waiting", model_name="slow") == 0
        assert 0 < value(during, "vllm:kv_cache_usage_perc", model_name="slow") \
            == value(during, "tabby_kv_cache_usage_ratio", model_name="slow")
        assert value(after, "tabby_jobs_finished_total", model="slow", outcome="cancelled") == 1


def test_metrics_need_a_key_unless_made_public(fresh: LiveServer, tmp_path: Path):
    reply = httpx.get(fresh.url + "/metrics")
    assert reply.status_code == 401 and reply.json()["error"]["message"]
    make_models(tmp_path)
    for public in serve(tmp_path, "tester", "--metrics-public", "true"):
        assert httpx.get(public.url + "/metrics").status_code == 200
