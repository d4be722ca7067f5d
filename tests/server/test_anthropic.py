"""Anthropic Messages end to end: real uvicorn, the real ``anthropic`` SDK, raw SSE through httpx."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import pytest

from tabby_fixed.toolcalls import ToolCallParser
from tests.live_server import LiveServer
from tests.server.conftest import API_KEY
from tests.toolcalls.test_seeds import TOOLS, call

ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS]
WRITE = "Writing it.\n" + call("write_file", ("path", "notes.txt"), ("content", "123")) + "\n" + \
    call("write_file", ("path", "a.py"), ("content", '    {"a": 1}'))


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": "RAW:" + text}]


@pytest.fixture(scope="module")
def claude(server: LiveServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def demo(demo_server: LiveServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=demo_server.url, api_key="unused", max_retries=0, timeout=30) as client:
        yield client


def test_create_returns_text_and_tool_use_blocks_with_exact_input(claude: anthropic.Anthropic):
    message = claude.messages.create(model="tester", max_tokens=500, tools=ANTHROPIC_TOOLS, messages=ask(WRITE))
    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[0].text == "Writing it."
    assert [(b.name, b.input) for b in message.content[1:]] == [
        ("write_file", {"path": "notes.txt", "content": "123"}),
        ("write_file", {"path": "a.py", "content": '    {"a": 1}'})]
    ids = [b.id for b in message.content[1:]]
    assert all(i.startswith("toolu_") for i in ids) and len(set(ids)) == 2
    assert message.stop_reason == "tool_use" and message.stop_sequence is None and message.role == "assistant"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens == 0


def test_stream_helper_builds_the_same_message(claude: anthropic.Anthropic):
    plain = claude.messages.create(model="tester", max_tokens=500, tools=ANTHROPIC_TOOLS, messages=ask(WRITE))
    with claude.messages.stream(model="tester", max_tokens=500, tools=ANTHROPIC_TOOLS, messages=ask(WRITE)) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    strip_ids = [{k: v for k, v in b.model_dump().items() if k != "id"} for b in final.content]
    assert strip_ids == [{k: v for k, v in b.model_dump().items() if k != "id"} for b in plain.content]
    assert text == "Writing it." and final.stop_reason == "tool_use"
    assert final.usage.input_tokens == plain.usage.input_tokens
    assert final.usage.output_tokens == plain.usage.output_tokens


def sse_events(body: str) -> list[tuple[str, dict]]:
    assert body.endswith("\r\n\r\n")
    events = []
    for frame in body[:-4].split("\r\n\r\n"):
        event_line, data_line = frame.split("\r\n")
        assert event_line.startswith("event: ") and data_line.startswith("data: ")
        payload = json.loads(data_line[6:])
        assert payload["type"] == event_line[7:], "the event line names the payload's type"
        events.append((event_line[7:], payload))
    return events


def test_raw_event_sequence(thinker: LiveServer):
    text = "Let me think.\n</think>\n\nSure.\n\n" + call("write_file", ("path", "a"), ("content", "b"))
    with httpx.stream(
            "POST", thinker.url + "/v1/messages?beta=true", headers={"x-api-key": API_KEY, "anthropic-beta": "x-1"},
            json={"model": "thinker", "max_tokens": 500, "stream": True, "messages": ask(text),
                  "tools": ANTHROPIC_TOOLS, "thinking": {"type": "enabled", "budget_tokens": 2048}}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.read().decode())
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    blocks = [(p["index"], p["content_block"]["type"]) for n, p in events if n == "content_block_start"]
    assert blocks == [(0, "thinking"), (1, "text"), (2, "tool_use")]
    # each block: start, deltas of its own index, stop; the thinking block's last delta is its signature
    for index, kind in blocks:
        own = [(n, p) for n, p in events if p.get("index") == index]
        assert own[0][0] == "content_block_start" and own[-1][0] == "content_block_stop"
        deltas = [p["delta"]["type"] for n, p in own[1:-1]]
        expected = {"thinking": "thinking_delta", "text": "text_delta", "tool_use": "input_json_delta"}[kind]
        assert set(deltas) - {"signature_delta"} == {expected}
        assert (deltas[-1] == "signature_delta") == (kind == "thinking")
    thinking = "".join(p["delta"].get("thinking", "") for n, p in events if n == "content_block_delta")
    arguments = "".join(p["delta"].get("partial_json", "") for n, p in events if n == "content_block_delta")
    assert thinking == "Let me think.\n" and json.loads(arguments) == {"path": "a", "content": "b"}
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["role"] == "assistant"
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] > 0 and delta["usage"]["input_tokens"] > 0


def test_thinking_blocks_come_back_and_go_back(thinker: LiveServer):
    text = "Let me think.\n</think>\n\nThe answer."
    with anthropic.Anthropic(base_url=thinker.url, api_key=API_KEY, max_retries=0, timeout=30) as client:
        message = client.messages.create(model="thinker", max_tokens=100, messages=ask(text),
                                         thinking={"type": "adaptive"})
        thinking, answer = message.content
        assert thinking.type == "thinking" and thinking.thinking == "Let me think.\n" and thinking.signature
        assert answer.text == "The answer." and message.stop_reason == "end_turn"
        with client.messages.stream(model="thinker", max_tokens=100, messages=ask(text)) as stream:
            final = stream.get_final_message()
        assert final.content[0].thinking == "Let me think.\n" and final.content[0].signature == thinking.signature
        again = client.messages.create(model="thinker", max_tokens=100, thinking={"type": "disabled"}, messages=[
            *ask(text), {"role": "assistant", "content": [thinking.model_dump(), answer.model_dump()]},
            {"role": "user", "content": "RAW:</think>second"}])
        assert again.content[-1].text == "second"


def test_tool_result_turn_ends_the_agent_loop(demo: anthropic.Anthropic):
    tools = [{"name": "write_file", "input_schema": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}}}]
    messages = [{"role": "user", "content": "write notes.txt containing exactly: 123"}]
    first = demo.messages.create(model="demo", max_tokens=500, tools=tools, messages=messages)
    use = first.content[-1]
    assert first.stop_reason == "tool_use" and use.input == {"path": "notes.txt", "content": "123"}
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                               "content": [{"type": "text", "text": "Wrote notes.txt"}]}]}]
    second = demo.messages.create(model="demo", max_tokens=500, tools=tools, messages=messages)
    assert second.stop_reason == "end_turn" and [b.text for b in second.content] == ["Done."]
    messages[-1]["content"][0]["is_error"] = True
    assert demo.messages.create(model="demo", max_tokens=500, tools=tools, messages=messages).content[0].text == "Done."


def test_count_tokens_matches_the_prompt_a_message_uses(claude: anthropic.Anthropic):
    system = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    request = {"model": "tester", "system": system,
               "tools": ANTHROPIC_TOOLS, "messages": [{"role": "system", "content": "A reminder."}, *ask("hi")]}
    counted = claude.messages.count_tokens(**request).input_tokens
    message = claude.messages.create(max_tokens=10, **request)
    assert counted == message.usage.input_tokens > 0
    assert claude.messages.count_tokens(model="tester", messages=ask("hi")).input_tokens < counted


def test_stop_sequences_and_max_tokens(claude: anthropic.Anthropic):
    stopped = claude.messages.create(model="tester", max_tokens=100, messages=ask("one two three"),
                                     stop_sequences=["three"])
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "three"
    assert stopped.content[0].text == "one two"
    cut = claude.messages.create(model="tester", max_tokens=2, messages=ask("one two three"))
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 2


def test_unknown_fields_beta_headers_and_server_tools_are_accepted(server: LiveServer):
    body = {"model": "tester", "max_tokens": 50, "messages": ask("fine"), "metadata": {"user_id": "u"},
            "context_management": {"edits": []}, "output_config": {"effort": "high"}, "future_field": 1,
            "tools": [*ANTHROPIC_TOOLS, {"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}
    for headers in ({"x-api-key": API_KEY, "anthropic-beta": "interleaved-thinking-2025-05-14,made-up-feature"},
                    {"authorization": f"Bearer {API_KEY}", "anthropic-version": "2023-06-01"}):
        response = httpx.post(server.url + "/v1/messages?beta=true", json=body, headers=headers)
        assert response.status_code == 200 and response.json()["content"] == [{"type": "text", "text": "fine"}]


def test_errors_are_in_anthropics_shape(server: LiveServer, claude: anthropic.Anthropic):
    with anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0) as bad_key, \
            pytest.raises(anthropic.AuthenticationError) as error:
        bad_key.messages.create(model="tester", max_tokens=10, messages=ask("x"))
    assert error.value.body == {"type": "error",
                                "error": {"type": "authentication_error", "message": "Invalid API key"}}
    with pytest.raises(anthropic.BadRequestError) as error:
        claude.messages.create(model="tester", max_tokens=10, messages=[{"role": "robot", "content": "x"}])
    assert error.value.body["error"]["type"] == "invalid_request_error" and "messages.0.role" in error.value.message
    missing = httpx.post(server.url + "/v1/messages/nope", headers={"x-api-key": API_KEY}, json={})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"


def test_an_error_mid_stream_is_an_error_event(server: LiveServer, claude: anthropic.Anthropic):
    with httpx.stream("POST", server.url + "/v1/messages", headers={"x-api-key": API_KEY},
                      json={"model": "tester", "max_tokens": 50, "stream": True,
                            "messages": [{"role": "user", "content": "CRASH:partial"}]}) as response:
        events = sse_events(response.read().decode())
    assert events[-1] == ("error", {"type": "error", "error": {"type": "api_error", "message": events[-1][1]["error"][
        "message"]}}) and "injected fault" in events[-1][1]["error"]["message"]
    assert "".join(p["delta"].get("text", "") for n, p in events if n == "content_block_delta") == "partial"
    with pytest.raises(anthropic.APIStatusError, match="injected fault"), claude.messages.stream(
            model="tester", max_tokens=50, messages=[{"role": "user", "content": "CRASH:partial"}]) as stream:
        stream.get_final_message()


def test_translation_matches_the_chat_parser(claude: anthropic.Anthropic):
    """Every seed shape reaches the client as the chat parser reads it, through Messages."""
    from tests.server.test_chat import SEED_OUTPUTS

    for text in SEED_OUTPUTS.values():
        want = ToolCallParser("qwen3_coder", TOOLS).parse(text)
        message = claude.messages.create(model="tester", max_tokens=1000, tools=ANTHROPIC_TOOLS, messages=ask(text))
        assert [(b.name, b.input) for b in message.content if b.type == "tool_use"] == \
            [(c.name, c.arguments) for c in want.tool_calls]


def test_system_blocks_become_one_leading_message_without_the_billing_stamp():
    from tabby_fixed.server.anthropic_models import MessagesRequest, to_chat_request

    body = MessagesRequest.model_validate({
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.9f8; cc_entrypoint=cli;"},
                   {"type": "text", "text": "You are an agent."}, {"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "A reminder."}]})
    messages = to_chat_request(body).messages
    assert [(m.role, m.text()) for m in messages] == [
        ("system", "You are an agent.\n\nBe brief.\n\nA reminder."), ("user", "hi")]
