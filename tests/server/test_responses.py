"""OpenAI Responses end to end: real uvicorn, the real openai SDK (create, the stream helper,
previous_response_id), raw SSE through httpx; and the store's bounds."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from tabby_fixed.server.response_store import ResponseStore
from tests.live_server import LiveServer
from tests.server.conftest import API_KEY
from tests.toolcalls.test_seeds import TOOLS, call

FUNCTIONS = [{"type": "function", **t["function"]} for t in TOOLS]
SKIPPED = [{"type": "web_search"}, {"type": "image_generation"},
           {"type": "namespace", "name": "mcp", "tools": []}, {"type": "custom", "name": "apply_patch"}]
WRITE = "Writing it.\n" + call("write_file", ("path", "notes.txt"), ("content", "123")) + "\n" + \
    call("write_file", ("path", "a.py"), ("content", '    {"a": 1}'))


@pytest.fixture(scope="module")
def demo(demo_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=demo_server.v1, api_key="unused", max_retries=0, timeout=30) as client:
        yield client


def shape(response) -> list[tuple]:
    """Output items without their ids."""
    items = []
    for item in response.output:
        if item.type == "function_call":
            items.append((item.type, item.name, item.arguments, item.status))
        elif item.type == "message":
            items.append((item.type, [part.text for part in item.content], item.status))
        else:
            items.append((item.type, [part.text for part in item.content or []]))
    return items


def test_create_returns_function_calls_with_exact_arguments(client: openai.OpenAI):
    response = client.responses.create(model="tester", input="RAW:" + WRITE, tools=[*FUNCTIONS, *SKIPPED])
    assert shape(response) == [
        ("message", ["Writing it."], "completed"),
        ("function_call", "write_file", '{"path": "notes.txt", "content": "123"}', "completed"),
        ("function_call", "write_file", '{"path": "a.py", "content": "    {\\"a\\": 1}"}', "completed")]
    calls = [item for item in response.output if item.type == "function_call"]
    assert all(c.call_id.startswith("call_") and c.id.startswith("fc_") for c in calls)
    assert response.status == "completed" and response.object == "response" and response.id.startswith("resp_")
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens


def test_stream_helper_builds_the_same_response(client: openai.OpenAI):
    plain = client.responses.create(model="tester", input="RAW:" + WRITE, tools=FUNCTIONS)
    with client.responses.stream(model="tester", input="RAW:" + WRITE, tools=FUNCTIONS) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert shape(final) == shape(plain) and final.usage.output_tokens == plain.usage.output_tokens
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 3
    assert "response.function_call_arguments.done" in kinds and "response.output_text.done" in kinds


def test_raw_event_sequence_with_reasoning(thinker: LiveServer):
    text = "Let me think.\n</think>\n\nSure.\n\n" + call("write_file", ("path", "a"), ("content", "b"))
    with httpx.stream("POST", thinker.v1 + "/responses", headers={"authorization": f"Bearer {API_KEY}"},
                      json={"model": "thinker", "input": "RAW:" + text, "tools": FUNCTIONS, "stream": True,
                            "reasoning": {"effort": "high"}, "include": ["reasoning.encrypted_content"]}) as response:
        assert response.status_code == 200
        body = response.read().decode()
    events = []
    for frame in body[:-4].split("\r\n\r\n"):
        event_line, data_line = frame.split("\r\n")
        payload = json.loads(data_line[6:])
        assert event_line == "event: " + payload["type"]
        events.append(payload)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    runs = [kind for i, kind in enumerate(kinds) if i == 0 or kind != kinds[i - 1]]  # deltas come per token
    assert runs == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done",
        "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed"]
    assert [e["output_index"] for e in events if e["type"] == "response.output_item.added"] == [0, 1, 2]
    done = events[-1]["response"]
    assert [item["type"] for item in done["output"]] == ["reasoning", "message", "function_call"]
    assert done["output"][0]["content"] == [{"type": "reasoning_text", "text": "Let me think.\n"}]
    assert done["output"][1]["content"][0]["text"] == "Sure."
    assert json.loads(done["output"][2]["arguments"]) == {"path": "a", "content": "b"}


def test_previous_response_id_continues_the_agent_loop(demo: openai.OpenAI):
    tools = [{"type": "function", "name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}}}]
    first = demo.responses.create(model="demo", input="write notes.txt containing exactly: 123", tools=tools,
                                  instructions="You write files.")
    (function_call,) = [item for item in first.output if item.type == "function_call"]
    assert json.loads(function_call.arguments) == {"path": "notes.txt", "content": "123"}
    result = [{"type": "function_call_output", "call_id": function_call.call_id, "output": "Wrote notes.txt"}]
    with demo.responses.stream(model="demo", previous_response_id=first.id, input=result, tools=tools) as stream:
        second = stream.get_final_response()
    assert second.output_text == "Done." and second.previous_response_id == first.id
    # without the stored turn, the tool result alone is still a tool result: the rule for it answers too
    assert demo.responses.create(model="demo", input=result, tools=tools).output_text == "Done."
    # a stored conversation carries the user's request: a follow-up question is answered in its context
    again = demo.responses.create(model="demo", previous_response_id=second.id,
                                  input=[{"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}])
    assert again.status == "completed"


def test_get_delete_and_store_false(client: openai.OpenAI):
    kept = client.responses.create(model="tester", input="RAW:kept")
    assert client.responses.retrieve(kept.id).output_text == "kept"
    client.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept.id)
    unstored = client.responses.create(model="tester", input="RAW:gone", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    with pytest.raises(openai.NotFoundError) as error:
        client.responses.create(model="tester", input="x", previous_response_id=unstored.id)
    assert error.value.body["param"] == "previous_response_id"


def test_max_output_tokens_makes_the_response_incomplete(client: openai.OpenAI):
    response = client.responses.create(model="tester", input="RAW:one two three", max_output_tokens=2)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "one"


def test_an_error_mid_stream_fails_the_response(http: httpx.Client):
    with http.stream("POST", "/v1/responses", json={"model": "tester", "input": "CRASH:partial",
                                                    "stream": True}) as response:
        last = response.read().decode()[:-4].split("\r\n\r\n")[-1]
    payload = json.loads(last.split("\r\n")[1][6:])
    assert payload["type"] == "response.failed" and "injected fault" in payload["response"]["error"]["message"]
    assert payload["response"]["status"] == "failed"


def test_tool_choice_of_another_tool_type_is_ignored(client: openai.OpenAI):
    response = client.responses.create(model="tester", input="RAW:" + WRITE, tools=[*FUNCTIONS, *SKIPPED],
                                       tool_choice={"type": "web_search"})
    assert [item.type for item in response.output] == ["message", "function_call", "function_call"]
    one_call = call("write_file", ("path", "notes.txt"), ("content", "123"))
    forced = client.responses.create(model="tester", input="RAW:" + one_call, tools=FUNCTIONS,
                                     tool_choice={"type": "function", "name": "write_file"})
    assert forced.tool_choice.name == "write_file" and forced.status == "completed"
    assert [item.name for item in forced.output if item.type == "function_call"] == ["write_file"]


def test_bad_input_is_a_400(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model="tester", input=[{"type": "message", "role": "user", "content": 5}])
    assert "Invalid request: input" in error.value.message


def test_the_store_is_bounded_in_count_and_age():
    now = [0.0]
    store = ResponseStore(size=2, ttl=10, clock=lambda: now[0])
    for name in ("a", "b", "c"):
        store.put({"id": name}, [])
        now[0] += 1
    assert store.get("a") is None and store.get("b") is not None and len(store) == 2
    now[0] = 11.5  # b was stored at 1, c at 2
    assert store.get("b") is None and store.get("c") is not None
    now[0] = 12.5
    assert len(store) == 0
    empty = ResponseStore(size=0, ttl=10)
    empty.put({"id": "x"}, [])
    assert empty.get("x") is None
