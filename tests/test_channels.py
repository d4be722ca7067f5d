"""Channelled answers (gpt-oss harmony, Muse Glimmer): reasoning from analysis (``to=self``),
content from final and preambles (``to=user``), calls handed to the tool-call parser, in any
chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabby_fixed.reasoning import ChannelSplitter, ReasoningDelta
from tabby_fixed.toolcalls import FORMATS, ContentDelta, ToolCallParser
from tabby_fixed.toolcalls.formats.base import MessageChannels
from tests.support import chunkings, chunks_at, parse_both
from tests.toolcalls.test_formats import TOOLS

HARMONY = FORMATS["harmony"].channels


def split_both(text: str, channels: MessageChannels = HARMONY) -> tuple[str | None, str]:
    """The whole-text split, after checking every chunking streams to the same split."""
    expected = ChannelSplitter(channels).split(text)
    for chunks in chunkings(text, random_count=6):
        splitter = ChannelSplitter(channels)
        events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.close()
        assert (splitter.reasoning, splitter.content) == expected
        assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == expected[1]
    return expected


def answer(text: str, tool_format: str = "harmony") -> tuple[str | None, str | None, list]:
    reasoning, content = split_both(text, FORMATS[tool_format].channels)
    result = parse_both(ToolCallParser(tool_format, TOOLS), content, random_count=4)
    return reasoning, result.content, [(c.name, c.arguments, c.complete) for c in result.tool_calls]


ANALYSIS = "<|channel|>analysis<|message|>Need the listing.<|end|>"


@pytest.mark.parametrize("call", [
    '<|start|>assistant to=functions.list_dir<|channel|>commentary json<|message|>{"path": "."}<|call|>',
    '<|start|>assistant<|channel|>commentary to=functions.list_dir <|constrain|>json<|message|>{"path": "."}',
    '<|start|>assistant<|channel|>analysis to=functions.list_dir code<|message|>{"path": "."}<|call|>',
    '<|start|>assistant<|channel|>commentary to=list_dir<|message|>{"path": "."}<|call|>',
], ids=["recipient in the role header", "recipient after the channel, stop token cut", "on analysis", "no namespace"])
def test_reasoning_then_a_call(call):
    assert answer(ANALYSIS + call) == ("Need the listing.", None, [("list_dir", {"path": "."}, True)])


def test_first_message_may_name_the_recipient_right_after_the_prompt():
    text = ' to=functions.list_dir<|channel|>commentary json<|message|>{"path": "."}<|call|>'
    assert answer(text) == (None, None, [("list_dir", {"path": "."}, True)])


def test_final_answer_and_preamble_are_content():
    text = (ANALYSIS + "<|start|>assistant<|channel|>commentary<|message|>Looking now.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>It is **empty**.<|return|>")
    assert answer(text) == ("Need the listing.", "Looking now.It is **empty**.", [])


def test_plain_text_without_the_envelope_is_content():
    assert split_both("just words") == (None, "just words")
    long = "x" * 600 + "<|message|> and more"
    assert split_both(long) == (None, long)


def test_cut_call_is_incomplete_with_the_arguments_that_finished():
    text = ANALYSIS + '<|start|>assistant to=functions.write_file<|channel|>commentary json<|message|>' \
                      '{"path": "a.py", "content": "x = '
    assert answer(text) == ("Need the listing.", None, [("write_file", {"path": "a.py"}, False)])


def test_glimmer_routes_by_recipient():
    call = '<atem:function_calls>\n<atem:invoke name="list_dir">\n<atem:parameter name="path">.</atem:parameter>\n' \
           "</atem:invoke>\n</atem:function_calls>"
    text = (" to=self<|message|>Need the listing.<|eom|><|start|>assistant to=user<|message|>Looking.<|eom|>"
            f"<|start|>assistant to=list_dir<|message|>{call}<|eom|>")
    assert answer(text, "muse_glimmer") == ("Need the listing.", "Looking.", [("list_dir", {"path": "."}, True)])
    assert split_both("<|message|>no recipient<|eot|>", FORMATS["muse_glimmer"].channels) == (None, "no recipient")


@settings(max_examples=150, deadline=None)
@given(text=st.lists(st.sampled_from(
    ["<|start|>", "assistant", " to=functions.list_dir", "<|channel|>", "analysis", "final", "commentary", " json",
     "<|constrain|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", '{"path": ', '"."', "}", "hi", "<|", " "]),
    max_size=40).map("".join), cuts=st.lists(st.integers(0, 10_000), max_size=20))
def test_any_chunking_equals_whole_and_no_input_raises(text, cuts):
    whole = ChannelSplitter(HARMONY)
    whole.split(text)
    splitter = ChannelSplitter(HARMONY)
    events = [e for chunk in chunks_at(text, cuts) for e in splitter.feed(chunk)] + splitter.close()
    assert (splitter.reasoning, splitter.content) == (whole.reasoning, whole.content)
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert (reasoning if reasoning.strip() else None) == whole.reasoning
    ToolCallParser("harmony", TOOLS).parse(whole.content)
