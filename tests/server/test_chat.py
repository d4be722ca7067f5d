"""Chat completions end to end: every seed case through real uvicorn and the real openai SDK,
non-streaming, raw streaming and the SDK's stream helper, all equal to the parser's own result."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tabby_fixed.toolcalls import ToolCallParser
from tests.toolcalls.test_seeds import BARE, GREP, TOOLS, call

SEED_OUTPUTS = {
    **{f"json-looking {v}": call("write_file", ("path", "x.txt"), ("content", v))
       for v in ["123", "true", "null", "[1, 2]", '{"a": 1}']},
    "indentation": call("write_file", ("path", "util.py"), ("content", "    return x\n")),
    "trailing blank line": call("write_file", ("path", "config.json"), ("content", '{"debug": true}\n')),
    "typed by schema": call("probe", ("path", "123"), ("content", " indented\n [1, 2]\n"), ("n", "42"),
                            ("flag", "True"), ("opt", "null")),
    "quoted names": call('"Bash"', ("command", "ls -la"), tag='<parameter="{}">'),
    "attribute name": f'<tool_call>\n<function=Bash>\n<parameter name="command">{GREP}\n</parameter>\n</function>\n'
                      "</tool_call>",
    "nameless json": '<tool_call>\n<function=retry_code>\n<parameter>\n{"attempt_id": "bf3b", "feedback": "ok"}\n'
                     "</parameter>\n</function>\n</tool_call>",
    "arg_value json": '<tool_call>\n<function=Bash>\n<arg_value>{"command": "ls"}</arg_value>\n</function>\n'
                      "</tool_call>",
    "bare block": BARE,
    "prose function tag": "Write a call as `<function=NAME>` then the parameters.",
    "two calls": "On it.\n" + call("edit", ("path", "a.py")) + "\n" + call("edit", ("path", "b.py")),
    "unicode": "Voilà 🙂\n" + call("write_file", ("path", "日本.txt"), ("content", "ü\u00a0x")),
}


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": "RAW:" + text}]


def expected(text: str):
    return ToolCallParser("qwen3_coder", TOOLS).parse(text)


def check(text: str, content: str | None, calls: list[tuple[str, str]], finish_reason: str) -> None:
    want = expected(text)
    assert (content or None if want.content is None else content) == want.content
    assert calls == [(c.name, c.arguments_json) for c in want.tool_calls]
    assert [json.loads(arguments) for _, arguments in calls] == [c.arguments for c in want.tool_calls]
    assert finish_reason == ("tool_calls" if want.tool_calls else "stop")


@pytest.mark.parametrize("text", SEED_OUTPUTS.values(), ids=SEED_OUTPUTS.keys())
def test_non_streaming(client: openai.OpenAI, text: str):
    response = client.chat.completions.create(model="tester", messages=ask(text), tools=TOOLS)
    choice = response.choices[0]
    calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
    check(text, choice.message.content, calls, choice.finish_reason)
    assert all(c.id.startswith("call_") and c.type == "function" for c in choice.message.tool_calls or [])
    assert response.usage.completion_tokens > 0 and response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens)


@pytest.mark.parametrize("text", SEED_OUTPUTS.values(), ids=SEED_OUTPUTS.keys())
def test_raw_stream(client: openai.OpenAI, text: str):
    content, calls, finish, roles, usage = [], {}, [], [], []
    for chunk in client.chat.completions.create(model="tester", messages=ask(text), tools=TOOLS, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.usage:
            usage.append(chunk.usage)
            assert chunk.choices == []
            continue
        (choice,) = chunk.choices
        delta = choice.delta
        roles += [delta.role] if delta.role else []
        kinds = [k for k in ("content", "tool_calls") if getattr(delta, k)]
        assert len(kinds) <= 1, "one kind of payload per chunk"
        content += [delta.content] if delta.content else []
        for part in delta.tool_calls or []:
            if part.id:
                assert part.index not in calls and part.function.name and part.type == "function"
                calls[part.index] = [part.function.name, ""]
            else:
                assert part.function.name is None and part.index in calls
            calls[part.index][1] += part.function.arguments or ""
        if choice.finish_reason:
            assert delta.content is None and delta.tool_calls is None, "finish_reason has its own chunk"
            finish.append(choice.finish_reason)
    assert roles == ["assistant"] and len(finish) == 1 and len(usage) == 1
    assert sorted(calls) == list(range(len(calls)))
    check(text, "".join(content), [tuple(calls[i]) for i in sorted(calls)], finish[0])


@pytest.mark.parametrize("text", SEED_OUTPUTS.values(), ids=SEED_OUTPUTS.keys())
def test_sdk_stream_helper(client: openai.OpenAI, text: str):
    with client.chat.completions.stream(model="tester", messages=ask(text), tools=TOOLS) as stream:
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
        final = stream.get_final_completion()
    choice = final.choices[0]
    calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
    check(text, choice.message.content, calls, choice.finish_reason)
    assert [(e.name, e.arguments) for e in done] == calls


def test_tool_choice_none_keeps_text_and_refuses_a_scripted_call(client: openai.OpenAI):
    choice = client.chat.completions.create(model="tester", messages=ask("No call."), tools=TOOLS,
                                            tool_choice="none").choices[0]
    assert choice.message.content == "No call." and not choice.message.tool_calls
    with pytest.raises(openai.UnprocessableEntityError, match="breaks the request's tools at character 10 "):
        client.chat.completions.create(model="tester", messages=ask(SEED_OUTPUTS["indentation"]), tools=TOOLS,
                                       tool_choice="none")


def test_parallel_tool_calls_false_allows_one_call_then_the_end(client: openai.OpenAI):
    one = "On it.\n" + call("edit", ("path", "a.py"))
    choice = client.chat.completions.create(model="tester", messages=ask(one), tools=TOOLS,
                                            parallel_tool_calls=False).choices[0]
    assert [json.loads(c.function.arguments) for c in choice.message.tool_calls] == [{"path": "a.py"}]
    with pytest.raises(openai.UnprocessableEntityError, match=f"at character {len(one)}"):
        client.chat.completions.create(model="tester", messages=ask(SEED_OUTPUTS["two calls"]), tools=TOOLS,
                                       parallel_tool_calls=False)


def test_without_tools_nothing_is_parsed(client: openai.OpenAI):
    text = SEED_OUTPUTS["indentation"]
    assert client.chat.completions.create(model="tester", messages=ask(text)).choices[0].message.content == text


def test_max_tokens_cuts_a_call_with_finish_reason_length(client: openai.OpenAI):
    text = SEED_OUTPUTS["indentation"]
    choice = client.chat.completions.create(model="tester", messages=ask(text), tools=TOOLS, max_tokens=14).choices[0]
    assert choice.finish_reason == "length"
    (cut,) = choice.message.tool_calls
    with pytest.raises(ValueError):
        json.loads(cut.function.arguments)


def test_stop_string_ends_the_answer(client: openai.OpenAI):
    choice = client.chat.completions.create(model="tester", messages=ask("alpha beta STOP gamma"),
                                            stop=["STOP"]).choices[0]
    assert choice.message.content == "alpha beta " and choice.finish_reason == "stop"


def test_replayed_history_with_calls_and_reasoning(client: openai.OpenAI):
    history = [
        {"role": "user", "content": "write it"},
        {"role": "assistant", "content": None, "reasoning_content": "thinking",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "write_file", "arguments": '{"path": "a", "content": "b"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "user", "content": "RAW:done"},
    ]
    assert client.chat.completions.create(model="tester", messages=history, tools=TOOLS).choices[0].message.content \
        == "done"


@pytest.mark.parametrize("model", ["thinker", "opener"], ids=["reasoning on", "template opens <think>"])
def test_reasoning_is_split_from_the_answer(workspace, model):
    from tests.server.conftest import API_KEY, serve

    for server in serve(workspace, model):
        thinker = openai.OpenAI(base_url=server.v1, api_key=API_KEY, max_retries=0)
        text = "Let me think.\n</think>\n\n" + SEED_OUTPUTS["indentation"]
        message = thinker.chat.completions.create(model=model, messages=ask(text), tools=TOOLS).choices[0].message
        assert message.model_extra["reasoning_content"] == message.model_extra["reasoning"] == "Let me think.\n"
        assert json.loads(message.tool_calls[0].function.arguments)["content"] == "    return x\n"
        chunks = list(thinker.chat.completions.create(model=model, messages=ask(text), tools=TOOLS, stream=True))
        reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks
                            if c.choices)
        mirrored = "".join((c.choices[0].delta.model_extra or {}).get("reasoning") or "" for c in chunks if c.choices)
        assert reasoning == mirrored == "Let me think.\n"


def test_text_completion(http: httpx.Client):
    body = http.post("/v1/completions", json={"prompt": "RAW:plain text", "max_tokens": 50}).json()
    assert body["choices"][0]["text"] == "plain text" and body["usage"]["completion_tokens"] > 0
    lines = [line for line in http.post("/v1/completions", json={"prompt": "RAW:plain text", "stream": True})
             .text.split("\r\n\r\n") if line.startswith("data: {")]
    assert "".join(json.loads(line[6:])["choices"][0]["text"] for line in lines) == "plain text"


def test_several_choices(client: openai.OpenAI, http: httpx.Client):
    text = SEED_OUTPUTS["indentation"]
    response = client.chat.completions.create(model="tester", messages=ask(text), tools=TOOLS, n=2)
    assert [c.index for c in response.choices] == [0, 1]
    assert all(json.loads(c.message.tool_calls[0].function.arguments)["content"] == "    return x\n"
               for c in response.choices)
    chunks = list(client.chat.completions.create(model="tester", messages=ask(text), tools=TOOLS, n=2, stream=True))
    assert all(len(c.choices) == 1 for c in chunks)
    finishes = sorted((c.choices[0].index, c.choices[0].finish_reason) for c in chunks if c.choices[0].finish_reason)
    assert finishes == [(0, "tool_calls"), (1, "tool_calls")]


def test_logprobs_cover_every_generated_token(client: openai.OpenAI, http: httpx.Client):
    text = "Hello there, world."
    choice = client.chat.completions.create(model="tester", messages=ask(text), logprobs=True,
                                            top_logprobs=2).choices[0]
    tokens = choice.logprobs.content
    assert "".join(t.token for t in tokens) == text
    assert all(t.logprob == 0.0 and t.bytes == list(t.token.encode()) and len(t.top_logprobs) == 1 for t in tokens)
    streamed = [t for c in client.chat.completions.create(model="tester", messages=ask(text), logprobs=True,
                                                          stream=True) if c.choices and c.choices[0].logprobs
                for t in c.choices[0].logprobs.content]
    assert [t.token for t in streamed] == [t.token for t in tokens]
    assert client.chat.completions.create(model="tester", messages=ask(text)).choices[0].logprobs is None
    completion = http.post("/v1/completions", json={"prompt": "RAW:" + text, "logprobs": 1}).json()["choices"][0]
    assert "".join(completion["logprobs"]["tokens"]) == text
    assert completion["logprobs"]["text_offset"][1] == len(completion["logprobs"]["tokens"][0])


def test_named_and_required_tool_choice_are_accepted(client: openai.OpenAI):
    text = SEED_OUTPUTS["indentation"]
    for choice in ("required", {"type": "function", "function": {"name": "write_file"}}):
        answer = client.chat.completions.create(model="tester", messages=ask(text), tools=TOOLS, tool_choice=choice)
        assert answer.choices[0].message.tool_calls[0].function.name == "write_file"
