"""Invariants over generated inputs: any chunking streams to the non-streaming result, nothing
the model wrote is lost, no input raises, and well-formed calls come back as written."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabby_fixed.toolcalls import FORMATS, ToolCallArgs, ToolCallParser
from tests.support import check_coverage, check_events, chunks_at, stream_events
from tests.toolcalls.test_formats import CASES, TOOLS

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces of every format's markup, so random text keeps hitting tags, half-tags and look-alikes.
TOKENS = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "<parameter",
          " name=", ">", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<minimax:tool_call>",
          "</minimax:tool_call>", "<invoke name=", "</invoke>", "write_file", "list_dir", "path", "content", "count",
          "\n", " ", "{", "}", '"', "'", ":", ",", "[1]", '"name": ', '"arguments": ', "True", "7", "x", "ü", "🙂",
          "<", "</", "=", "\\",
          "<seed:tool_call>", "</seed:tool_call>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>",
          "functions.list_dir:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>",
          "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
          "<｜tool▁calls▁end｜>",
          "<｜DSML｜tool_calls>", "<｜DSML｜function_calls>", "<｜DSML｜invoke name=", "</｜DSML｜invoke>",
          "<｜DSML｜parameter name=", ' string="true">', "</｜DSML｜parameter>", "</｜DSML｜tool_calls>",
          "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[{", "}]", "<tool_calls>", "<tool_calls:opensource>",
          "<tool_call:opensource>", "<tool_sep>", "<tool_sep:opensource>", "<arg_key:opensource>",
          "</arg_value:opensource>", "</tool_call:opensource>", "</tool_calls>",
          "<|start|>assistant to=functions.list_dir", "<|channel|>commentary json", "<|message|>", "<|call|>",
          "<atem:function_calls>", '<atem:invoke name="list_dir">', '<atem:parameter name="path">',
          "</atem:parameter>", "</atem:invoke>", "<|tool_call>call:", "<|\"|>", "<tool_call|>", "path:"]
FORMAT_NAMES = sorted({fmt.names[0] for fmt in FORMATS.values()})

markup_soup = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)
any_text = st.one_of(markup_soup, st.text(max_size=200))


@SETTINGS
@given(name=st.sampled_from(FORMAT_NAMES), text=any_text, cuts=st.lists(st.integers(0, 10_000), max_size=40),
       with_tools=st.booleans())
def test_any_input_any_chunking_equals_whole_and_loses_nothing(name, text, cuts, with_tools):
    parser = ToolCallParser(name, TOOLS if with_tools else None)
    expected = parser.parse(text)
    check_coverage(text, expected)
    events, result = stream_events(parser, chunks_at(text, cuts))
    assert result == expected
    check_events(events, result)


@SETTINGS
@given(name=st.sampled_from(FORMAT_NAMES), text=any_text)
def test_single_character_deltas_equal_whole(name, text):
    parser = ToolCallParser(name, TOOLS)
    events, result = stream_events(parser, list(text))
    assert result == parser.parse(text)
    check_events(events, result)


# Well-formed calls with arbitrary string values (that do not end in a closing tag look-alike).
safe_string = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40).filter(
    lambda s: "</parameter>" not in s and "</arg_value>" not in s)
call = st.one_of(
    st.builds(lambda path, content, count: ("write_file", {"path": path, "content": content, "count": count}),
              safe_string, safe_string, st.integers(-10**6, 10**6)),
    st.builds(lambda path: ("list_dir", {"path": path}), safe_string),
)
prose = st.text(st.characters(blacklist_characters="<", blacklist_categories=["Cs"]), max_size=30)


@SETTINGS
@given(case=st.sampled_from(CASES), calls=st.lists(call, min_size=1, max_size=3), before=prose, after=prose,
       cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_well_formed_calls_come_back_as_written(case, calls, before, after, cuts):
    text = before + case.write(calls) + after
    parser = ToolCallParser(case.name, TOOLS)
    events, result = stream_events(parser, chunks_at(text, cuts))
    assert result == parser.parse(text)
    check_events(events, result)
    check_coverage(text, result)
    assert [(c.name, c.arguments) for c in result.tool_calls] == calls
    assert "".join((result.content or "").split()) == "".join((before + after).split())  # separators aside


# JSON arguments of calls whose header names them stream as they arrive; any JSON comes back equal.
NAMED_JSON = {
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.mystery:0<|tool_call_argument_begin|>{}"
               "<|tool_call_end|><|tool_calls_section_end|>",
    "mistral": "[TOOL_CALLS]mystery[ARGS]{}",
    "harmony": "<|start|>assistant to=functions.mystery<|channel|>commentary json<|message|>{}<|call|>",
    "deepseek_v31": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>mystery<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
                    "<｜tool▁calls▁end｜>",
}
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=["Cs"]), max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)


@SETTINGS
@given(name=st.sampled_from(sorted(NAMED_JSON)), arguments=st.dictionaries(st.text(max_size=8), json_value, max_size=4),
       ascii_only=st.booleans(), indent=st.sampled_from([None, 1]), cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_named_json_arguments_come_back_as_written(name, arguments, ascii_only, indent, cuts):
    body = json.dumps(arguments, ensure_ascii=ascii_only, indent=indent)
    text = NAMED_JSON[name].replace("{}", body, 1)
    parser = ToolCallParser(name, TOOLS)
    events, result = stream_events(parser, chunks_at(text, cuts))
    assert result == parser.parse(text)
    check_events(events, result)
    check_coverage(text, result)
    [call] = result.tool_calls
    assert call.complete and call.arguments == arguments and call.name == "mystery"


@pytest.mark.parametrize("name", sorted(NAMED_JSON))
def test_named_json_string_arguments_stream_character_by_character(name):
    content = 'line "one"\n\tüñí 🙂 \\ end' * 4
    text = NAMED_JSON[name].replace("{}", json.dumps({"path": "a.py", "content": content}), 1)
    events, result = stream_events(ToolCallParser(name, TOOLS), list(text))
    fragments = [e.fragment for e in events if isinstance(e, ToolCallArgs)]
    assert len(fragments) >= len(content)  # one escaped character per delta
    assert result.tool_calls[0].arguments == {"path": "a.py", "content": content}
