"""What each newer format does beyond the shared suite: its own spellings, ids, typing and
detection, and every tool-format name upstream TabbyAPI accepts."""

from __future__ import annotations

import re

import pytest

from tabby_fixed.output import OutputParser, ReasoningSettings
from tabby_fixed.toolcalls import FORMATS, ToolCallBegin, ToolCallParser, detect_format
from tests.support import parse_both
from tests.toolcalls.test_formats import TOOLS

#: ``ALL_TOOLCALL_FORMATS`` of upstream TabbyAPI (endpoints/OAI/utils/tools.py at e632af4).
UPSTREAM_NAMES = ["deepseek_v4", "dsv4", "gemma4", "glm4_5", "glm4_6", "glm4_7", "harmony", "hy3", "hy_v3", "laguna",
                  "poolside_v1", "minimax_m2", "minimax_m2_1", "minimax_m2_5", "mistral_old", "mistral", "muse_glimmer",
                  "glimmer", "qwen3_coder", "qwen3_5", "step3_5", "step3_7"]


@pytest.mark.parametrize("name", [*UPSTREAM_NAMES, "kimi", "kimi_k2", "kimi_linear", "gpt_oss", "deepseek_v3_1"])
def test_upstream_names_and_aliases_resolve(name):
    assert name in FORMATS


def calls(tool_format: str, text: str) -> list:
    result = parse_both(ToolCallParser(tool_format, TOOLS), text, random_count=4)
    return [(c.name, c.arguments, c.complete, c.call_id) for c in result.tool_calls]


def test_mistral_call_id_is_kept():
    text = '[TOOL_CALLS]list_dir[CALL_ID]a1B2c3D4e[ARGS]{"path": "."}'
    assert calls("mistral", text) == [("list_dir", {"path": "."}, True, "a1B2c3D4e")]


def test_mistral_string_parameter_given_a_number_gets_its_text():
    assert calls("mistral", '[TOOL_CALLS]list_dir[ARGS]{"path": 123}') == [("list_dir", {"path": "123"}, True, None)]


def test_mistral_old_single_object_and_list_without_ids():
    assert calls("mistral_old", '[TOOL_CALLS] {"name": "list_dir", "arguments": {"path": "."}}') == [
        ("list_dir", {"path": "."}, True, None)]
    assert calls("mistral_old", '[TOOL_CALLS][{"name": "get_time", "arguments": "{}"}]') == [
        ("get_time", {}, True, None)]


def test_mistral_old_list_with_a_non_call_is_content():
    text = '[TOOL_CALLS][{"name": "list_dir", "arguments": {}}, 7]'
    assert calls("mistral_old", text) == []


def test_kimi_id_without_namespace_or_index():
    text = ('<|tool_calls_section_begin|><|tool_call_begin|> list_dir <|tool_call_argument_begin|>{"path": "."}'
            "<|tool_call_end|><|tool_calls_section_end|>")
    assert calls("kimi_k2", text) == [("list_dir", {"path": "."}, True, "list_dir")]


def test_kimi_call_section_inside_unclosed_thinking_ends_it():
    text = ("<think>I should list it.<|tool_calls_section_begin|><|tool_call_begin|>functions.list_dir:0"
            '<|tool_call_argument_begin|>{"path": "."}<|tool_call_end|><|tool_calls_section_end|>')
    parser = OutputParser(tool_parser=ToolCallParser("kimi_k2", TOOLS), reasoning=ReasoningSettings(False))
    parser.feed(text)
    parser.close()
    output = parser.result()
    assert output.reasoning == "I should list it." and output.content is None
    assert [(c.name, c.call_id) for c in output.tool_calls] == [("list_dir", "functions.list_dir:0")]


@pytest.mark.parametrize(("attribute", "value"), [("true", "123"), ("false", 123), ("", 123)])
def test_dsml_string_attribute_states_the_type(attribute, value):
    spelled = f' string="{attribute}"' if attribute else ""
    text = (f'<｜DSML｜tool_calls>\n<｜DSML｜invoke name="write_file">\n<｜DSML｜parameter name="count"{spelled}>'
            "123</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
    assert calls("deepseek_v4", text) == [("write_file", {"count": value}, True, None)]


def test_hy3_tokens_must_carry_the_suffix_of_their_tokenizer():
    bare = "<tool_calls>\n<tool_call>list_dir<tool_sep>\n<arg_key>path</arg_key>\n<arg_value>.</arg_value>\n" \
           "</tool_call>\n</tool_calls>"
    suffixed = bare.replace(">", ":opensource>")
    assert calls("hy3", suffixed) == [("list_dir", {"path": "."}, True, None)]
    assert calls("hy3_preview", bare) == [("list_dir", {"path": "."}, True, None)]
    assert calls("hy3", bare) == [] and calls("hy3_preview", suffixed) == []


def test_seed_oss_reads_python_literals_by_schema():
    text = ("<seed:tool_call>\n<function=write_file>\n<parameter=path>True</parameter>\n<parameter=force>True"
            "</parameter>\n<parameter=tags>['x', 'y']</parameter>\n<parameter=maybe>None</parameter>\n</function>\n"
            "</seed:tool_call>")
    assert calls("seed_oss", text) == [("write_file", {"path": "True", "force": True, "tags": ["x", "y"],
                                                       "maybe": "None"}, True, None)]


def test_gemma4_strings_are_taken_exactly():
    text = ('<|tool_call>call:write_file{path:<|"|>a "b" {c}, [d]: \\n<|"|>, tags:[<|"|>x<|"|>, "y"], count: 3,'
            ' options:{deep:{ok:false}}, maybe: null}<tool_call|>')
    assert calls("gemma4", text) == [("write_file", {"path": 'a "b" {c}, [d]: \\n', "tags": ["x", "y"], "count": 3,
                                                     "options": {"deep": {"ok": False}}, "maybe": None}, True, None)]


@pytest.mark.parametrize("body", ["{path}", "{:1}", "{path:1 2 3", "[1]", "{a:1}}"])
def test_gemma4_malformed_body_is_content(body):
    text = f"<|tool_call>call:list_dir{body}<tool_call|>"
    result = parse_both(ToolCallParser("gemma4", TOOLS), text, random_count=4)
    assert result.tool_calls == [] and result.content == text


@pytest.mark.parametrize(("template", "name"), [
    ("{{ '<｜DSML｜tool_calls>' }}", "deepseek_v4"),
    ("{% set dsml_token = '｜DSML｜' %}{{ '<' + dsml_token + 'function_calls>' }}", "deepseek_v32"),
    ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ name }}<｜tool▁sep｜>", "deepseek_v31"),
    ("{{ '<|tool_call>call:' + name }}{{ '<tool_call|>' }}", "gemma4"),
    ("<|start|>assistant to=user<|message|>{{ m }}<|eot|><atem:function_calls>", "muse_glimmer"),
    ("{{ '<tool_calls:opensource>' }}<tool_call:opensource>{{ n }}<tool_sep:opensource>", "hy3"),
    ("[AVAILABLE_TOOLS]{{ tools }}[/AVAILABLE_TOOLS][TOOL_CALLS]{{ calls }}", "mistral_old"),
])
def test_detected_from_template_markers(template, name):
    assert detect_format(template) == name


def test_named_call_whose_body_is_not_an_object_is_content():
    text = "[TOOL_CALLS]list_dir[ARGS]not json"
    assert parse_both(ToolCallParser("mistral", TOOLS), text).content == text


@pytest.mark.parametrize("body", ['{"path": .}', '{"path" "x"}', '{"path": "a",}', "{'path': 'a'}"])
def test_named_json_that_breaks_off_ends_the_call_incomplete(body):
    text = f"[TOOL_CALLS]list_dir[ARGS]{body} trailing"
    result = parse_both(ToolCallParser("mistral", TOOLS), text, random_count=4)
    [call] = result.tool_calls
    assert call.name == "list_dir" and not call.complete and "trailing" in result.content


def test_mistral_calls_without_an_id_get_one_of_nine_letters_and_digits_in_both_modes():
    parser = OutputParser(tool_parser=ToolCallParser("mistral", TOOLS))
    events = parser.feed('[TOOL_CALLS]list_dir[ARGS]{"path": "."}') + parser.close()
    [begin] = [e for e in events if isinstance(e, ToolCallBegin)]
    [call] = parser.result().tool_calls
    assert re.fullmatch("[A-Za-z0-9]{9}", begin.call_id) and call.call_id == begin.call_id
