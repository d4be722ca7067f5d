"""Reasoning split: start state from the prompt, tags across deltas, calls that end reasoning."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabby_fixed.reasoning import ReasoningDelta, ReasoningSplitter, starts_in_reasoning
from tabby_fixed.toolcalls import ContentDelta
from tests.support import chunkings, chunks_at


def split_both(text: str, start: bool, **options) -> tuple[str | None, str]:
    """The whole-text split, after checking every chunking streams to the same split."""
    expected = ReasoningSplitter(start, **options).split(text)
    for chunks in chunkings(text):
        splitter = ReasoningSplitter(start, **options)
        events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.close()
        assert (splitter.reasoning, splitter.content) == expected
        assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == expected[1]
        reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        assert (reasoning if reasoning.strip() else None) == expected[0]
    return expected


@pytest.mark.parametrize(("prompt", "inside"), [
    ("<|im_start|>assistant\n<think>\n", True),
    ("<|assistant|><think>", True),
    ("]~b]ai\n<think>\n", True),
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False),
    ("<|assistant|></think>", False),
    ("<|im_start|>assistant\n", False),
    ("Explain <think> tags<|im_end|>\n<|im_start|>assistant\n", False),
    ("<|assistant|><think>\n<tool_call>", False),
])
def test_start_state_from_the_prompt_tail(prompt, inside):
    assert starts_in_reasoning(prompt) is inside


def test_pre_opened_reasoning_has_only_the_closing_tag():
    assert split_both("Let me see.\n</think>\n\nThe answer.", True) == ("Let me see.\n", "\n\nThe answer.")


def test_model_opened_reasoning():
    assert split_both("\n<think>plan</think>answer", False) == ("plan", "\nanswer")


def test_opening_tag_after_other_text_is_content():
    text = "Use <think> to reason.</think>"
    assert split_both(text, False) == (None, text)


def test_unclosed_reasoning_is_all_reasoning():
    assert split_both("still thinking <tool_", True) == ("still thinking <tool_", "")


def test_tool_call_tag_ends_reasoning_and_stays_content():
    text = "I will call it.\n<tool_call>\n<function=f>\n</function>\n</tool_call>"
    assert split_both(text, True, exit_tags=("<tool_call>",)) == (
        "I will call it.\n", "<tool_call>\n<function=f>\n</function>\n</tool_call>")


def test_custom_tags():
    assert split_both("[THINK]a[/THINK]b", False, start_tag="[THINK]", end_tag="[/THINK]") == ("a", "b")


def test_whitespace_only_reasoning_is_none():
    assert split_both("\n\n</think>x", True) == (None, "x")


TAG_SOUP = st.lists(st.sampled_from(["<think>", "</think>", "<tool_call>", "<", "</", "think", ">", "a", "\n", " "]),
                    max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(TAG_SOUP, st.text(max_size=80)), start=st.booleans(),
       cuts=st.lists(st.integers(0, 10_000), max_size=20))
def test_streaming_equals_whole_and_only_tags_are_dropped(text, start, cuts):
    chunks = chunks_at(text, cuts)
    splitter = ReasoningSplitter(start, exit_tags=("<tool_call>",))
    events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.close()
    assert (splitter.reasoning, splitter.content) == ReasoningSplitter(start, exit_tags=("<tool_call>",)).split(text)
    kept = "".join(e.text for e in events)  # reasoning and content, in the order written
    dropped = [text.replace("<think>", "", 1).replace("</think>", "", 1), text.replace("<think>", "", 1),
               text.replace("</think>", "", 1), text]
    assert kept in dropped
