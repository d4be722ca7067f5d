"""Adversarial model output: the parser's cost grows linearly with its input on every shape, not
only on typical output, and no input makes it raise or write invalid JSON.

Speed itself is measured in bench/parser_adversarial.py; here only the growth is checked, with a
bound generous enough for a busy machine: 16 times the text may cost at most 48 times the thread
CPU time (linear is 16, quadratic 256).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.parser_adversarial import TAGS, TOOLS, Shape, cases, cpu_seconds, parse_streamed, parse_whole
from tabby_fixed.toolcalls import ToolCallParser
from tests.toolcalls.test_properties import TOKENS

SMALL, LARGE = 2 * 1024, 32 * 1024
GROWTH_BOUND = 48
NOISE_SECONDS = 0.003  # timer and scheduling noise allowed on top


def assert_linear(shape: Shape, tool_format: str) -> None:
    for parse in (parse_whole, parse_streamed):
        small = cpu_seconds(parse, shape.text(tool_format, SMALL), tool_format, rounds=3)
        large = cpu_seconds(parse, shape.text(tool_format, LARGE), tool_format, rounds=2)
        assert large < GROWTH_BOUND * small + NOISE_SECONDS, (
            f"{shape.name} ({tool_format}, {parse.__name__}): {SMALL} chars {small * 1e3:.2f} ms, "
            f"{LARGE} chars {large * 1e3:.2f} ms")


@pytest.mark.parametrize(("shape", "tool_format"), cases(), ids=lambda v: getattr(v, "name", v))
def test_every_adversarial_shape_is_linear(shape: Shape, tool_format: str):
    assert_linear(shape, tool_format)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_format=st.sampled_from(sorted(TAGS)), inside_call=st.booleans(),
       unit=st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5).map("".join))
def test_any_repeated_markup_is_linear(tool_format: str, inside_call: bool, unit: str):
    """A model looping on any few pieces of markup, in prose or inside an open call."""
    shape = Shape("repeated markup", lambda t: t.call + t.param if inside_call else "", lambda t: unit)
    assert_linear(shape, tool_format)


def test_deeply_nested_string_arguments_are_not_a_call_and_do_not_raise():
    arguments = "[" * 5000 + "]" * 5000
    text = '<tool_call>{"name": "f", "arguments": ' + json.dumps(arguments) + "}</tool_call>"
    for result in (ToolCallParser("hermes", TOOLS).parse(text), _streamed(text)):
        assert result.tool_calls == [] and result.content == text


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_in_string_arguments_are_not_a_call(constant: str):
    """They would come out of json.dumps as invalid JSON in ``arguments``."""
    text = '<tool_call>{"name": "f", "arguments": "{\\"n\\": ' + constant + '}"}</tool_call>'
    result = ToolCallParser("hermes", TOOLS).parse(text)
    assert result.tool_calls == [] and result.content == text


def _streamed(text: str):
    stream = ToolCallParser("hermes", TOOLS).stream()
    for at in range(0, len(text), 7):
        stream.feed(text[at:at + 7])
    stream.close()
    return stream.result
