"""Channelled answers (gpt-oss harmony): reasoning from analysis, content from final and
preambles, calls handed to the tool-call parser, in any chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabby_fixed.reasoning import ChannelSplitter, ReasoningDelta
from tabby_fixed.toolcalls import FORMATS, ContentDelta, ToolCallParser
from tests.support import chunkings, chunks_at, parse_both
from tests.toolcalls.test_formats import TOOLS

HARMONY = FORMATS["harmony"].channels


def split_both(text: str) -> tuple[str | None, str]:
    """The whole-text split, after checking every chunking streams to the same split."""
    expected = ChannelSplitter(HARMONY).split(text)
    for chunks in chunkings(text, random_count=6):
        splitter = ChannelSplitter(HARMONY)
        events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.close()
        assert (splitter.reasoning, splitter.content) == expected
        assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == expected[1]
    return expected


def answer(text: str) -> tuple[str | None, str | None, list]:
    reasoning, content = split_both(text)
    result = parse_both(ToolCallParser("harmony", TOOLS), content, random_count=4)
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
