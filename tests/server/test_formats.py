"""Every tool format end to end: a scripted model per format, served by real uvicorn, spoken to by
the real openai SDK, non-streaming and streaming. Each model thinks first in its family's own
reasoning tags, then writes text and two calls; the client must get the reasoning, the text and
the calls, with the model's own call ids where the format has them (Kimi)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest
import yaml

from tabby_fixed.toolcalls import ToolCallParser, reasoning_tags
from tests.live_server import LiveServer
from tests.server.conftest import ADMIN_KEY, make_models, serve
from tests.toolcalls.test_formats import CASES, LIST, TOOLS, WRITE, FormatCase

RAW = [{"match": r"\ARAW:(?P<text>.*)\Z", "output": "{text}"}]
MODEL_IDS = {"kimi_k2": ["functions.list_dir:0", "functions.write_file:1"], "mistral_old": ["c00000000", "c00000001"]}


@pytest.fixture(scope="module")
def format_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server whose model_dir holds a scripted model per format; requests load them inline."""
    root = tmp_path_factory.mktemp("formats")
    models = make_models(root)
    for case in CASES:
        (models / f"fmt-{case.name}").mkdir()
        (models / f"fmt-{case.name}" / "scripted.yml").write_text(yaml.safe_dump(
            {"tool_format": case.name, "reasoning": True, "responses": RAW}))
    yield from serve(root, "tester", "--inline-model-loading", "true")


@pytest.fixture(scope="module")
def admin(format_server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=format_server.v1, api_key=ADMIN_KEY, max_retries=0, timeout=30)


#: Families whose reasoning and text are channelled messages rather than tagged text: what goes
#: before the calls and after them.
CHANNELLED = {
    "harmony": ("<|channel|>analysis<|message|>The listing first.<|end|>"
                "<|start|>assistant<|channel|>commentary<|message|>Checking the folder.\n<|end|>", ""),
    "muse_glimmer": (" to=self<|message|>The listing first.<|eom|><|start|>assistant to=user<|message|>"
                     "Checking the folder.\n<|eom|><|start|>assistant to=list_dir<|message|>", "<|eom|>"),
}


def answer(case: FormatCase) -> str:
    start, end = reasoning_tags(case.name, None) or ("<think>", "</think>")
    before, after = CHANNELLED.get(case.name, (f"{start}The listing first.{end}Checking the folder.\n", ""))
    return before + case.write([LIST, WRITE]) + after


def check_message(case: FormatCase, reasoning: str | None, content: str | None, calls: list) -> None:
    want = ToolCallParser(case.name, TOOLS).parse(case.write([LIST, WRITE]))
    assert reasoning == "The listing first."
    assert (content or "").strip() == "Checking the folder."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [LIST, WRITE]
    assert [c.function.arguments for c in calls] == [c.arguments_json for c in want.tool_calls]
    ids = [c.id for c in calls]
    if case.name in MODEL_IDS:
        assert ids == MODEL_IDS[case.name]
    elif case.name == "mistral":  # ids made for Mistral have the shape its templates expect back
        assert all(re.fullmatch("[A-Za-z0-9]{9}", i) for i in ids) and len(set(ids)) == 2
    else:
        assert all(i.startswith("call_") for i in ids)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_format_end_to_end(admin: openai.OpenAI, case: FormatCase):
    messages = [{"role": "user", "content": "RAW:" + answer(case)}]
    model = f"fmt-{case.name}"
    choice = admin.chat.completions.create(model=model, messages=messages, tools=TOOLS).choices[0]
    assert choice.finish_reason == "tool_calls"
    message = choice.message
    check_message(case, message.model_extra.get("reasoning_content"), message.content, message.tool_calls)

    with admin.chat.completions.stream(model=model, messages=messages, tools=TOOLS) as stream:
        reasoning = "".join((e.chunk.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                            for e in stream if e.type == "chunk" and e.chunk.choices)
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == "tool_calls"
    check_message(case, reasoning, final.message.content, final.message.tool_calls)


def test_kimi_ids_round_trip(admin: openai.OpenAI):
    """The ids a client gets back are the ones the model wrote, so replaying them matches the history."""
    case = next(c for c in CASES if c.name == "kimi_k2")
    first = admin.chat.completions.create(model="fmt-kimi_k2", tools=TOOLS, messages=[
        {"role": "user", "content": "RAW:" + case.write([LIST])}]).choices[0].message
    [call] = first.tool_calls
    history = [{"role": "user", "content": "look"},
               {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
               {"role": "tool", "tool_call_id": call.id, "content": "a.py"},
               {"role": "user", "content": "RAW:done"}]
    assert call.id == "functions.list_dir:0"
    assert admin.chat.completions.create(model="fmt-kimi_k2", messages=history, tools=TOOLS).choices[0] \
        .message.content == "done"


def test_harmony_channels_split_without_tools(admin: openai.OpenAI):
    """The envelope never reaches the client, with or without tools in the request."""
    text = ("<|channel|>analysis<|message|>Short answer.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Paris.<|return|>")
    message = admin.chat.completions.create(model="fmt-harmony", messages=[
        {"role": "user", "content": "RAW:" + text}]).choices[0].message
    assert (message.model_extra["reasoning_content"], message.content) == ("Short answer.", "Paris.")


@pytest.mark.parametrize(("folder", "settings", "expected"), [
    ("fmt-harmony", {}, "harmony"),
    ("fmt-harmony", {"harmony": False}, None),
    ("fmt-mistral", {"harmony": True}, "harmony"),
    ("fmt-mistral", {"muse_glimmer": True}, "muse_glimmer"),
    ("fmt-muse_glimmer", {"muse_glimmer": False}, None),
])
def test_harmony_and_muse_glimmer_switches(format_server: LiveServer, folder, settings, expected):
    """Upstream's model.harmony / model.muse_glimmer: true selects the format, false turns it off."""
    admin_headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    for name, extra in (("tester", {}), (folder, settings)):  # a different folder first, so the load happens
        response = httpx.post(format_server.v1 + "/model/load", headers=admin_headers,
                              json={"model_name": name, **extra}, timeout=30)
        assert response.status_code == 200
    card = httpx.get(format_server.v1 + "/model", headers=admin_headers, timeout=30).json()
    assert card["parameters"]["tool_format"] == expected


def test_kimi_ids_reach_messages_and_responses_clients(format_server: LiveServer, admin: openai.OpenAI):
    """The Anthropic Messages and OpenAI Responses routes hand out the model's own ids too."""
    case = next(c for c in CASES if c.name == "kimi_k2")
    text = "RAW:" + case.write([LIST, WRITE])
    with anthropic.Anthropic(base_url=format_server.url, api_key=ADMIN_KEY, max_retries=0, timeout=30) as claude:
        message = claude.messages.create(model="fmt-kimi_k2", max_tokens=500, messages=[
            {"role": "user", "content": text}], tools=[{"name": t["function"]["name"], "input_schema": t["function"][
                "parameters"]} for t in TOOLS])
    assert [b.id for b in message.content if b.type == "tool_use"] == MODEL_IDS["kimi_k2"]
    response = admin.responses.create(model="fmt-kimi_k2", input=text, tools=[
        {"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in TOOLS])
    assert [i.call_id for i in response.output if i.type == "function_call"] == MODEL_IDS["kimi_k2"]
