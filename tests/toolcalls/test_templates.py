"""Round trip through the families' own chat templates: render a call, parse it back.

The templates live in ../shared/templates (test data of this project, not copied here). A clone
outside the project's workspace has no ../shared; these tests then skip.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tabby_fixed.reasoning import ChannelSplitter, ReasoningSplitter, starts_in_reasoning
from tabby_fixed.templating import render_chat
from tabby_fixed.toolcalls import FORMATS, ToolCallParser, detect_format, reasoning_tags
from tests.support import parse_both, tool

TEMPLATES = Path(__file__).resolve().parents[3] / "shared" / "templates"
pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

FAMILIES = {  # template file -> the format it teaches
    "qwen3_coder.jinja": "qwen3_coder",
    "qwen3_5.jinja": "qwen3_coder",
    "qwen3_hermes.jinja": "hermes",
    "glm4_5_glm4_6.jinja": "glm4_5",
    "glm4_7.jinja": "glm4_7",
    "minimax_m2.jinja": "minimax_m2",
    "seed_oss.jinja": "seed_oss",
    "kimi_k2.jinja": "kimi_k2",
    "ministral3_devstral2.jinja": "mistral",
    "hy3.jinja": "hy3_preview",
}
UNSUPPORTED = ["llama3_1.jinja"]

STRING = {"type": "string"}
TOOLS = [
    tool("write_file", path=STRING, content=STRING, note=STRING, count={"type": "integer"},
         force={"type": "boolean"}, tags={"type": "array", "items": STRING}, options={"type": "object"}),
    tool("edit", path=STRING, old_string=STRING, new_string=STRING),
]
WRITE = {
    "path": "src/app.py",
    "content": "    def f(x):\n        return x < 1  # </parameter> & </arg_value>\n\n",
    "note": '{"a": 1}',
    "count": 3,
    "force": True,
    "tags": ["x", "y"],
    "options": {"mode": "fast", "level": 2, "nested": {"ok": False}},
}
EDIT = {"path": "ünïcode/日本.txt", "old_string": "null", "new_string": "  123\n"}
END_OF_TURN = {"minimax_m2.jinja": "[e~[", "qwen3_coder.jinja": "<|im_end|>", "qwen3_5.jinja": "<|im_end|>",
               "qwen3_hermes.jinja": "<|im_end|>", "hy3.jinja": "<｜hy_eos｜>", "kimi_k2.jinja": "<|im_end|>",
               "seed_oss.jinja": "<seed:eos>", "ministral3_devstral2.jinja": "</s>"}


def template(name: str) -> str:
    return (TEMPLATES / name).read_text()


def call_id(name: str, index: int) -> str:
    """Ids as this server hands them out; Kimi's are the model's own, which name the tool."""
    return f"functions.{name}:{index}"


def conversation(calls: list[tuple[str, dict]]) -> list[dict]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Change the files."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id(name, i), "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)]},
    ]


def generated_turn(source: str, messages: list[dict], tools: list[dict] = TOOLS) -> tuple[str, str]:
    """The prompt up to the assistant turn and the text the model would have generated."""
    prompt = render_chat(source, messages[:-1], tools=tools, add_generation_prompt=True)
    full = render_chat(source, messages, tools=tools, add_generation_prompt=False)
    if full.startswith(prompt):
        return prompt, full[len(prompt):]
    # The generation prompt pre-opens reasoning (``<think>``) that the history spells differently
    # (``</think>`` alone, or nothing): the model's turn starts where they part, after an empty thought.
    shared = 0
    while prompt[shared] == full[shared]:
        shared += 1
    tag_start = full.rfind("<", 0, shared + 1)
    if prompt[tag_start:].strip() == "<think>":
        shared = tag_start
    assert prompt[shared:].strip() == "<think>", "the prompt is not where the turn starts"
    turn = full[shared:]
    return prompt, turn if "</think>" in turn else "</think>" + turn


@pytest.mark.parametrize("calls", [[("write_file", WRITE)], [("edit", EDIT), ("write_file", WRITE)]],
                         ids=["one call", "two calls"])
@pytest.mark.parametrize("file_name", sorted(FAMILIES))
def test_rendered_calls_parse_back_equal(file_name, calls):
    source = template(file_name)
    prompt, turn = generated_turn(source, conversation(calls))
    parser = ToolCallParser(FAMILIES[file_name], TOOLS)
    splitter = ReasoningSplitter(starts_in_reasoning(prompt), exit_tags=(parser.call_start,))
    reasoning, content = splitter.split(turn)
    result = parse_both(parser, content, random_count=3)
    assert [(c.name, c.arguments, c.complete) for c in result.tool_calls] == [
        (name, arguments, True) for name, arguments in calls]
    assert reasoning is None
    assert (result.content or "").replace(END_OF_TURN.get(file_name, "\x00"), "").strip() == ""
    if FAMILIES[file_name] == "kimi_k2":  # the model's id comes back as the call's id
        assert [c.call_id for c in result.tool_calls] == [call_id(name, i) for i, (name, _) in enumerate(calls)]


@pytest.mark.parametrize("file_name", sorted(FAMILIES))
def test_detect_format_names_the_template_format(file_name):
    assert detect_format(template(file_name)) == FAMILIES[file_name]


@pytest.mark.parametrize("call", [("write_file", WRITE), ("edit", EDIT)], ids=["write", "edit"])
def test_gpt_oss_turn_splits_into_reasoning_and_a_call(call):
    """gpt-oss renders one call per assistant message, after its analysis (the ``thinking`` field)."""
    source = template("gpt_oss.jinja")
    messages = conversation([call])
    messages[-1]["thinking"] = "I will write it."
    described = [{**t, "function": {**t["function"], "description": t["function"]["name"]}} for t in TOOLS]
    prompt, turn = generated_turn(source, messages, described)
    assert prompt.endswith("<|start|>assistant") and detect_format(source) == "harmony"
    parser = ToolCallParser("harmony", TOOLS)
    reasoning, content = ChannelSplitter(FORMATS["harmony"].channels).split(turn)
    result = parse_both(parser, content, random_count=3)
    assert reasoning == "I will write it."
    assert [(c.name, c.arguments, c.complete) for c in result.tool_calls] == [(*call, True)]
    assert result.content is None


@pytest.mark.parametrize("file_name", UNSUPPORTED)
def test_detect_format_declines_formats_it_cannot_parse(file_name):
    assert detect_format(template(file_name)) is None


def shipping_hy3() -> str:
    """The preview template with the shipping tokenizer's ``:opensource`` tokens in its token variables."""
    return re.sub(r"'<(/?)(think|tool_calls|tool_call|tool_sep|arg_key|arg_value)>'", r"'<\1\2:opensource>'",
                  template("hy3.jinja"))


@pytest.mark.parametrize("calls", [[("write_file", WRITE)], [("edit", EDIT), ("write_file", WRITE)]],
                         ids=["one call", "two calls"])
def test_hy3_shipping_tokens_round_trip_with_reasoning(calls):
    source = shipping_hy3()
    assert detect_format(source) == "hy3" and reasoning_tags("hy3", source) == ("<think:opensource>",
                                                                               "</think:opensource>")
    messages = conversation(calls)
    messages[-1]["reasoning_content"] = "Two edits."
    prompt = render_chat(source, messages[:-1], tools=TOOLS, reasoning_effort="high")
    assert starts_in_reasoning(prompt, "<think:opensource>", "</think:opensource>")
    turn = "Two edits.</think:opensource>" + render_chat(source, messages, tools=TOOLS, add_generation_prompt=False,
                                                         reasoning_effort="high").split("</think:opensource>")[-1]
    parser = ToolCallParser("hy3", TOOLS)
    splitter = ReasoningSplitter(True, "<think:opensource>", "</think:opensource>", exit_tags=(parser.call_start,))
    reasoning, content = splitter.split(turn)
    result = parse_both(parser, content, random_count=3)
    assert reasoning == "Two edits."
    assert [(c.name, c.arguments, c.complete) for c in result.tool_calls] == [(n, a, True) for n, a in calls]
