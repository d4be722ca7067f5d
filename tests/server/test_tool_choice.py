"""tool_choice, strict tools, parallel_tool_calls and structured output through the real server
and the openai SDK, on scripted models whose answers are checked against the request's grammar."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest

from tests.server.conftest import API_KEY
from tests.toolcalls.test_seeds import TOOLS, call


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": "RAW:" + text}]


NAMED = {"type": "function", "function": {"name": "write_file"}}


def test_required_refuses_a_prose_answer(client: openai.OpenAI):
    with pytest.raises(openai.UnprocessableEntityError) as error:
        client.chat.completions.create(model="tester", messages=ask("I'd rather chat."), tools=TOOLS,
                                       tool_choice="required")
    assert error.value.body["param"] == "tools" and "at character 0" in error.value.body["message"]


def test_a_named_tool_is_the_one_called(client: openai.OpenAI):
    good = call("write_file", ("path", "a.py"), ("content", "x"))
    answer = client.chat.completions.create(model="tester", messages=ask(good), tools=TOOLS, tool_choice=NAMED)
    assert answer.choices[0].message.tool_calls[0].function.name == "write_file"
    with pytest.raises(openai.UnprocessableEntityError, match="at character 22 "):  # after <tool_call>\n<function=
        client.chat.completions.create(model="tester", messages=ask(call("edit", ("path", "a.py"))), tools=TOOLS,
                                       tool_choice=NAMED)


def test_strict_arguments_follow_the_schema(client: openai.OpenAI):
    strict = [{"type": "function", "function": {"name": "chmod", "strict": True, "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "mode": {"type": "integer"}},
        "required": ["path", "mode"], "additionalProperties": False}}}]
    good = call("chmod", ("path", "a"), ("mode", "644"))
    answer = client.chat.completions.create(model="tester", messages=ask("Sure.\n" + good), tools=strict)
    assert json.loads(answer.choices[0].message.tool_calls[0].function.arguments) == {"path": "a", "mode": 644}
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="tester", messages=ask(good.replace("644", "rw")), tools=strict)


@pytest.mark.parametrize(("fields", "param"), [
    ({"regex_pattern": "a(?=b)"}, "regex_pattern"),
    ({"json_schema": {"type": "object", "dependentSchemas": {"a": {}}}}, "json_schema"),
    ({"grammar_string": "start: ("}, "grammar_string"),
])
def test_what_llguidance_refuses_is_a_400_naming_the_field(client: openai.OpenAI, fields, param):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="tester", messages=ask("x"), extra_body=fields)
    assert error.value.body["param"] == param


def test_a_reasoning_model_thinks_freely_before_the_constraint(thinker):
    with openai.OpenAI(base_url=thinker.v1, api_key=API_KEY, max_retries=0, timeout=30) as client:
        text = 'Maybe {not json} here.\n</think>\n\n{"a": 1}'
        answer = client.chat.completions.create(model="thinker", messages=ask(text),
                                                response_format={"type": "json_object"})
        assert json.loads(answer.choices[0].message.content) == {"a": 1}
        assert answer.choices[0].message.reasoning_content == "Maybe {not json} here.\n"
        with pytest.raises(openai.UnprocessableEntityError):
            client.chat.completions.create(model="thinker", messages=ask("Thought.</think>\nnot json"),
                                           response_format={"type": "json_object"})


def test_the_demo_model_answers_structured_output_with_valid_json(demo_server):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                                               "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1}},
              "required": ["city", "days", "tags"], "additionalProperties": False}
    with openai.OpenAI(base_url=demo_server.v1, api_key="unused", max_retries=0, timeout=30) as client:
        answer = client.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "plan a trip"}],
            response_format={"type": "json_schema", "json_schema": {"name": "trip", "schema": schema}})
    jsonschema.validate(json.loads(answer.choices[0].message.content), schema)


@pytest.mark.parametrize("strict", [False, True])
def test_langchain_structured_output_by_function_calling(server, strict):
    """LangChain forces the schema's tool by name and reads its arguments back as the object."""
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    class Forecast(BaseModel):
        city: str
        days: int

    with httpx.Client(timeout=30) as http:
        model = ChatOpenAI(base_url=server.v1, api_key=API_KEY, model="tester", max_retries=0, http_client=http)
        structured = model.with_structured_output(Forecast, method="function_calling", strict=strict)
        answer = structured.invoke("RAW:" + call("Forecast", ("city", "Paris"), ("days", "3")))
        assert answer == Forecast(city="Paris", days=3)
        with pytest.raises(openai.UnprocessableEntityError):  # a script answering in prose breaks the forced call
            structured.invoke("RAW:It will rain.")


def test_anthropic_and_responses_choices_are_enforced_too(server):
    """Anthropic ``any`` and ``disable_parallel_tool_use``, Responses ``required``: the same grammar."""
    import anthropic

    tools = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS]
    first = call("edit", ("path", "a.py"))
    two = first + "\n" + call("edit", ("path", "b.py"))
    with anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=30) as claude:
        with pytest.raises(anthropic.UnprocessableEntityError):
            claude.messages.create(model="tester", max_tokens=200, messages=ask("Just prose."), tools=tools,
                                   tool_choice={"type": "any"})
        with pytest.raises(anthropic.UnprocessableEntityError, match=f"at character {len(first)} "):
            claude.messages.create(model="tester", max_tokens=200, messages=ask(two), tools=tools,
                                   tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    functions = [{"type": "function", **t["function"]} for t in TOOLS]
    with openai.OpenAI(base_url=server.v1, api_key=API_KEY, max_retries=0, timeout=30) as client, \
            pytest.raises(openai.UnprocessableEntityError):
        client.responses.create(model="tester", input="RAW:Just prose.", tools=functions, tool_choice="required")
