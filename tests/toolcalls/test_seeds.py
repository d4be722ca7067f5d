"""Every bug shape in the seed documents (../shared/seeds), streaming and not."""

from __future__ import annotations

import pytest

from tabby_fixed.toolcalls import ToolCallParser
from tests.support import parse_both, tool

STRING = {"type": "string"}
WRITE_FILE = tool("write_file", path=STRING, content=STRING)
PROBE = tool("probe", path=STRING, content=STRING, n={"type": "integer"}, flag={"type": "boolean"},
             opt={"type": ["string", "null"]})
BASH = tool("Bash", command=STRING, timeout={"type": "number"})
RETRY = tool("retry_code", attempt_id=STRING, feedback=STRING)
EDIT = tool("edit", path=STRING)
STRING_INT = tool("string_int_tool", arg1=STRING, arg2={"type": "integer"})
BOOL = tool("bool_tool", arg1={"type": "boolean"})
TOOLS = [WRITE_FILE, PROBE, BASH, RETRY, EDIT, STRING_INT, BOOL]


def qwen(tools=TOOLS) -> ToolCallParser:
    return ToolCallParser("qwen3_coder", tools)


def call(function: str, *params: tuple[str, str], tag: str = "<parameter={}>") -> str:
    body = "".join(f"{tag.format(k)}\n{v}\n</parameter>\n" for k, v in params)
    return f"<tool_call>\n<function={function}>\n{body}</function>\n</tool_call>"


# Seed 000: string arguments that look like JSON, and whitespace that must survive.

@pytest.mark.parametrize("value", ["123", "true", "null", "[1, 2]", '{"a": 1}', "1e400", "None", "True"])
def test_json_looking_strings_stay_strings(value):
    result = parse_both(qwen(), call("write_file", ("path", "x.txt"), ("content", value)))
    assert result.tool_calls[0].arguments == {"path": "x.txt", "content": value}
    assert result.content is None


def test_config_json_with_trailing_blank_line_keeps_text_and_newline():
    result = parse_both(qwen(), call("write_file", ("path", "config.json"), ("content", '{"debug": true}\n')))
    assert result.tool_calls[0].arguments_json == '{"path": "config.json", "content": "{\\"debug\\": true}\\n"}'


def test_indentation_and_trailing_newline_survive():
    result = parse_both(qwen(), call("write_file", ("path", "util.py"), ("content", "    return x\n")))
    assert result.tool_calls[0].arguments == {"path": "util.py", "content": "    return x\n"}


def test_only_the_template_newlines_are_removed():
    text = "<tool_call>\n<function=write_file>\n<parameter=content>\n\n    indented\n  [1, 2]\n\n\n</parameter>\n" \
           "</function>\n</tool_call>"
    assert parse_both(qwen(), text).tool_calls[0].arguments == {"content": "\n    indented\n  [1, 2]\n\n"}


def test_seed_000_typed_parameters_follow_the_schema():
    text = call("probe", ("path", "123"), ("content", " indented\n [1, 2]\n"), ("n", "42"), ("flag", "true"),
                ("opt", "null"))
    arguments = parse_both(qwen(), text).tool_calls[0].arguments
    assert arguments == {"path": "123", "content": " indented\n [1, 2]\n", "n": 42, "flag": True, "opt": "null"}


def test_without_tools_values_are_guessed_like_upstream():
    result = parse_both(ToolCallParser("qwen3_coder"), call("write_file", ("path", "123"), ("content", " x ")))
    assert result.tool_calls[0].arguments == {"path": 123, "content": "x"}


# Seed 001: quoted names.

@pytest.mark.parametrize("spelling", ['<parameter="{}">', "<parameter='{}'>"])
def test_quoted_parameter_names_are_unquoted(spelling):
    result = parse_both(qwen(), call("Bash", ("command", "ls -la"), tag=spelling))
    assert result.tool_calls[0].arguments == {"command": "ls -la"}


def test_quoted_function_name_is_unquoted_in_the_first_streamed_event():
    result = parse_both(qwen(), call('"Bash"', ("command", "ls")))
    assert result.tool_calls[0].name == "Bash"


def test_quoted_names_keep_string_enforcement_and_boolean_normalisation():
    text = call('"string_int_tool"', ("arg1", "42"), ("arg2", "7"), tag='<parameter="{}">')
    assert parse_both(qwen(), text).tool_calls[0].arguments == {"arg1": "42", "arg2": 7}
    text = call("bool_tool", ("arg1", "True"), tag="<parameter='{}'>")
    assert parse_both(qwen(), text).tool_calls[0].arguments == {"arg1": True}


def test_mixed_quoting_and_two_calls():
    first = '<tool_call>\n<function="string_int_tool">\n<parameter="arg1">\na\n</parameter>\n' \
            "<parameter='arg2'>\n1\n</parameter>\n</function>\n</tool_call>"
    second = call("'write_file'", ("path", "b"), ("content", "c"), tag="<parameter={}>")
    result = parse_both(qwen(), first + "\n" + second)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("string_int_tool", {"arg1": "a", "arg2": 1}), ("write_file", {"path": "b", "content": "c"})]


@pytest.mark.parametrize(("tag", "key"), [
    ('<parameter=arg"1>', 'arg"1'),  # an inner quote is part of the name
    ('<parameter="command>', '"command'),  # an unmatched quote is not a pair
    ('<parameter="a" "b">', '"a" "b"'),  # two quoted tokens are not merged
    ('<parameter= "command" >', "command"),  # surrounding whitespace is trimmed first
])
def test_quote_trimming_is_narrow(tag, key):
    text = f"<tool_call>\n<function=Bash>\n{tag}\nv\n</parameter>\n</function>\n</tool_call>"
    assert parse_both(qwen(), text).tool_calls[0].arguments == {key: "v"}


def test_colliding_spellings_keep_the_first():
    text = '<tool_call>\n<function=Bash>\n<parameter=command>\nfirst\n</parameter>\n' \
           '<parameter="command">\nsecond\n</parameter>\n</function>\n</tool_call>'
    call_ = parse_both(qwen(), text).tool_calls[0]
    assert call_.arguments == {"command": "first"} and call_.complete


def test_empty_function_name_is_not_a_call():
    text = '<tool_call>\n<function="">\n</function>\n</tool_call>'
    result = parse_both(qwen(), text)
    assert result.tool_calls == [] and result.content == text


# Seed 002: bare <function=NAME> blocks.

BARE = "Doing it.\n<function=edit>\n<parameter=path>\na.py\n</parameter>\n</function>"


def test_bare_block_with_declared_name_is_a_call_in_both_modes():
    result = parse_both(qwen(), BARE)
    assert result.content == "Doing it.\n"
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("edit", {"path": "a.py"})]


def test_bare_block_with_seed_chunking():
    chunks = ["Doing it.\n", "<", "function", "=", "edit", ">\n", "<parameter=path>\n", "a.py\n",
              "</parameter>\n", "</function>"]
    stream = qwen().stream()
    for chunk in chunks:
        stream.feed(chunk)
    stream.close()
    assert stream.result == qwen().parse("".join(chunks))


def test_orphan_close_after_bare_block_belongs_to_the_call():
    result = parse_both(qwen(), BARE + " \n</tool_call>\nDone.")
    assert result.content == "Doing it.\n\nDone."
    assert result.tool_calls[0].raw.endswith("</function> \n</tool_call>")


@pytest.mark.parametrize("text", [
    "Write a call as `<function=NAME>` then the parameters.",
    "<function=undeclared>\n<parameter=path>\na\n</parameter>\n</function>",
    "<function=edit> is how you would call it, with parameters.",
    "def f():\n    return '<function=edit>'\n",
    "<function=edit>\n<param>\n</function>",
    "trailing <function=edi",
    "trailing <function=edit>\n",
])
def test_literal_function_tags_stay_text(text):
    result = parse_both(qwen(), text)
    assert result.tool_calls == [] and result.content == text


# Seed 004: parameter tags in other spellings.

GREP = """grep -rn "correction_fit\\|job_type" lotto_graph/api/routes/jobs.py 2>/dev/null | sed -n '1,40p'"""


@pytest.mark.parametrize("tag", ['<parameter name="command">', "<parameter name='command'>",
                                 "<parameter name=command>"])
def test_attribute_spellings(tag):
    text = f"<tool_call>\n<function=Bash>\n{tag}{GREP}\n</parameter>\n</function>\n</tool_call><|im_end|>"
    result = parse_both(qwen(), text)
    assert result.tool_calls[0].arguments == {"command": GREP}
    assert result.content == "<|im_end|>"


def test_nameless_parameter_spreads_its_json_object():
    feedback = "Checked: `get_model` DOES exist on CorrectionRepository, so leave \"that\" call.\n"
    body = '{"attempt_id": "bf3b0e1cb16b", "feedback": ' + __import__("json").dumps(feedback) + "}"
    text = f"<tool_call>\n<function=retry_code>\n<parameter>\n{body}\n</parameter>\n</function>\n</tool_call>"
    assert parse_both(qwen(), text).tool_calls[0].arguments == {"attempt_id": "bf3b0e1cb16b", "feedback": feedback}


@pytest.mark.parametrize("closing", ["</arg_value>\n", "\n"])
def test_arg_value_json_in_place_of_parameters(closing):
    text = f'<tool_call>\n<function=Bash>\n<arg_value>{{"command": "ls -la", "timeout": 5}}{closing}' \
           "</function>\n</tool_call>"
    call_ = parse_both(qwen(), text).tool_calls[0]
    assert call_.arguments == {"command": "ls -la", "timeout": 5} and call_.complete


def test_json_spread_gives_string_parameters_their_text():
    text = '<tool_call>\n<function=Bash>\n<parameter>{"command": 123, "timeout": 5}</parameter>\n' \
           "</function>\n</tool_call>"
    assert parse_both(qwen(), text).tool_calls[0].arguments == {"command": "123", "timeout": 5}


@pytest.mark.parametrize("body", ["<parameter name> command </parameter>\n", "<parameter> </parameter>\n", "",
                                  "<｜end｜>\n"])
def test_valueless_bodies_give_an_empty_complete_call(body):
    text = f"<tool_call>\n<function=Bash>\n{body}</function>\n</tool_call>"
    call_ = parse_both(qwen(), text).tool_calls[0]
    assert (call_.name, call_.arguments, call_.complete) == ("Bash", {}, True)


def test_parameters_of_other_tools_are_guessed():
    text = call("Bash", ("dirpath", " src "), ("parameter", "[1]"), ("previous_thinking", "hm"))
    assert parse_both(qwen(), text).tool_calls[0].arguments == {"dirpath": "src", "parameter": [1],
                                                                "previous_thinking": "hm"}


# Wrapper and closing-tag tolerance.

def test_missing_final_wrapper_close_is_tolerated_after_function_close():
    text = "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n"
    call_ = parse_both(qwen(), text).tool_calls[0]
    assert call_.arguments == {"command": "ls"} and call_.complete


def test_missing_function_close_at_the_end_is_a_cut_call():
    text = "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n"
    call_ = parse_both(qwen(), text).tool_calls[0]
    assert call_.arguments == {"command": "ls"} and not call_.complete
    assert call_.arguments_json == '{"command": "ls"'


def test_wrapper_close_also_closes_a_call_missing_its_function_close():
    text = "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</tool_call>\nok"
    result = parse_both(qwen(), text)
    assert result.tool_calls[0].complete and result.content == "\nok"


def test_two_functions_in_one_wrapper():
    text = "<tool_call>\n<function=edit>\n<parameter=path>\na\n</parameter>\n</function>\n" \
           "<function=edit>\n<parameter=path>\nb\n</parameter>\n</function>\n</tool_call>"
    result = parse_both(qwen(), text)
    assert [c.arguments for c in result.tool_calls] == [{"path": "a"}, {"path": "b"}] and result.content is None


def test_cut_inside_a_string_value_streams_what_was_written():
    text = "<tool_call>\n<function=write_file>\n<parameter=content>\n    line one\n</para"
    call_ = parse_both(qwen(), text).tool_calls[0]
    assert not call_.complete and call_.arguments == {}
    assert call_.arguments_json == '{"content": "    line one\\n</para'


# Held-out measurements (issue 15).

@pytest.mark.parametrize(("cut_after", "arguments"), [
    ('"name": "write_file"', {}), ('"name": "write_file", ', {}), ('"arguments": {', {}),
    ('"path": "a.py"', {"path": "a.py"}), ('"path": "a.py", ', {"path": "a.py"}),
    ('"content": "x = 1', {"path": "a.py"}),
])
def test_hermes_call_cut_after_its_name_is_an_incomplete_call(cut_after, arguments):
    whole = '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\\n"}}\n</tool_call>'
    text = "Writing.\n" + whole[:whole.index(cut_after) + len(cut_after)]
    result = parse_both(ToolCallParser("hermes", TOOLS), text)
    assert result.content == "Writing.\n"
    [call] = result.tool_calls
    assert (call.name, call.arguments, call.complete) == ("write_file", arguments, False)


def test_hermes_call_cut_inside_its_name_stays_content():
    text = '<tool_call>\n{"name": "write_f'
    assert parse_both(ToolCallParser("hermes", TOOLS), text).content == text


def test_hermes_cut_number_is_not_taken_for_the_whole():
    text = '<tool_call>\n{"name": "Bash", "arguments": {"command": "ls", "timeout": 12'
    assert parse_both(ToolCallParser("hermes", TOOLS), text).tool_calls[0].arguments == {"command": "ls"}


NULLABLE_CHOICE = tool("pick", mode={"type": ["string", "null"], "enum": ["value", None]},
                       level={"type": ["string", "null"], "enum": ["null", None]}, fixed={"const": None})


@pytest.mark.parametrize("tool_format", ["glm4_7", "qwen3_coder"])
def test_enum_decides_between_the_string_null_and_null(tool_format):
    params = [("mode", "null"), ("level", "null"), ("fixed", "null")]
    text = (f"<tool_call>pick{''.join(f'<arg_key>{k}</arg_key><arg_value>{v}</arg_value>' for k, v in params)}"
            "</tool_call>") if tool_format == "glm4_7" else call("pick", *params)
    result = parse_both(ToolCallParser(tool_format, [NULLABLE_CHOICE]), text)
    assert result.tool_calls[0].arguments == {"mode": None, "level": "null", "fixed": None}


def test_enum_value_written_as_text_stays_text():
    result = parse_both(ToolCallParser("glm4_7", [NULLABLE_CHOICE]),
                        "<tool_call>pick<arg_key>mode</arg_key><arg_value>value</arg_value></tool_call>")
    assert result.tool_calls[0].arguments == {"mode": "value"}


def test_qwen3_coder_whitespace_in_an_unclosed_block_belongs_to_the_block():
    text = "Checking.\n<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n"
    result = parse_both(qwen(), text)
    assert result.content == "Checking.\n"
    assert result.tool_calls[0].arguments == {"command": "ls"} and result.tool_calls[0].complete
