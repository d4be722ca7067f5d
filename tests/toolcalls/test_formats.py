"""The same conformance cases for every registered format, streaming and not.

Each format supplies a writer that spells calls the way its template does; the cases are shared.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tabby_fixed.toolcalls import FORMATS, ToolCallParser
from tests.support import check_coverage, parse_both, tool

Call = tuple[str, dict]
STRING = {"type": "string"}
TOOLS = [
    tool("write_file", path=STRING, content=STRING, count={"type": "integer"}, ratio={"type": "number"},
         force={"type": "boolean"}, tags={"type": "array"}, options={"type": "object"},
         maybe={"type": ["string", "null"]}),
    tool("list_dir", path=STRING),
    tool("get_time"),
]


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def qwen3_coder(calls: list[Call]) -> str:
    def one(name: str, arguments: dict) -> str:
        params = "".join(f"<parameter={k}>\n{_text(v)}\n</parameter>\n" for k, v in arguments.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    return "\n".join(one(*c) for c in calls)


def glm4_5(calls: list[Call]) -> str:
    def one(name: str, arguments: dict) -> str:
        params = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{_text(v)}</arg_value>\n" for k, v in arguments.items())
        return f"<tool_call>{name}\n{params}</tool_call>"
    return "\n".join(one(*c) for c in calls)


def glm4_7(calls: list[Call]) -> str:
    return "".join(f"<tool_call>{name}" + "".join(f"<arg_key>{k}</arg_key><arg_value>{_text(v)}</arg_value>"
                                                    for k, v in arguments.items()) + "</tool_call>"
                   for name, arguments in calls)


def _invokes(wrapper: str, invoke: str, parameter: str,
             attributes: Callable[[object], str] = lambda v: "") -> Callable[[list[Call]], str]:
    """``<WRAPPER><INVOKE name="N"><PARAMETER name="K"…>V</PARAMETER></INVOKE></WRAPPER>`` writers."""
    def write(calls: list[Call]) -> str:
        invokes = "".join(f'<{invoke} name="{name}">\n' + "".join(
            f'<{parameter} name="{k}"{attributes(v)}>{_text(v)}</{parameter}>\n' for k, v in arguments.items())
            + f"</{invoke}>\n" for name, arguments in calls)
        return f"<{wrapper}>\n{invokes}</{wrapper}>"
    return write


minimax_m2 = _invokes("minimax:tool_call", "invoke", "parameter")


def hermes(calls: list[Call]) -> str:
    return "\n".join("<tool_call>\n" + json.dumps({"name": n, "arguments": a}, ensure_ascii=False) + "\n</tool_call>"
                     for n, a in calls)


def seed_oss(calls: list[Call]) -> str:
    def one(name: str, arguments: dict) -> str:
        params = "".join(f"<parameter={k}>{_text(v)}</parameter>\n" for k, v in arguments.items())
        return f"<seed:tool_call>\n<function={name}>\n{params}</function>\n</seed:tool_call>"
    return "\n".join(one(*c) for c in calls)


def _json(arguments: dict) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def kimi_k2(calls: list[Call]) -> str:
    return "<|tool_calls_section_begin|>" + "".join(
        f"<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>{_json(a)}<|tool_call_end|>"
        for i, (name, a) in enumerate(calls)) + "<|tool_calls_section_end|>"


def deepseek_v31(calls: list[Call]) -> str:
    return "<｜tool▁calls▁begin｜>" + "".join(
        f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{_json(a)}<｜tool▁call▁end｜>" for name, a in calls) \
        + "<｜tool▁calls▁end｜>"


def _dsml(block: str) -> Callable[[list[Call]], str]:
    return _invokes(f"｜DSML｜{block}", "｜DSML｜invoke", "｜DSML｜parameter",
                    lambda v: f' string="{str(isinstance(v, str)).lower()}"')


def mistral(calls: list[Call]) -> str:
    return "".join(f"[TOOL_CALLS]{name}[ARGS]{_json(a)}" for name, a in calls)


def mistral_old(calls: list[Call]) -> str:
    return "[TOOL_CALLS]" + json.dumps([{"name": name, "arguments": a, "id": f"c{i:08d}"}
                                        for i, (name, a) in enumerate(calls)], ensure_ascii=False)


def _hy3(suffix: str) -> Callable[[list[Call]], str]:
    def write(calls: list[Call]) -> str:
        def one(name: str, arguments: dict) -> str:
            params = "".join(f"<arg_key{suffix}>{k}</arg_key{suffix}>\n"
                             f"<arg_value{suffix}>{_text(v)}</arg_value{suffix}>\n" for k, v in arguments.items())
            return f"<tool_call{suffix}>{name}<tool_sep{suffix}>\n{params}</tool_call{suffix}>\n"
        return f"<tool_calls{suffix}>\n" + "".join(one(*c) for c in calls) + f"</tool_calls{suffix}>"
    return write


def harmony(calls: list[Call]) -> str:
    return "".join(f"<|start|>assistant to=functions.{name}<|channel|>commentary json<|message|>{_json(a)}<|call|>"
                   for name, a in calls)


def _gemma(value: object) -> str:
    if isinstance(value, str):
        return f'<|"|>{value}<|"|>'
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_gemma(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma(v) for v in value) + "]"
    return json.dumps(value)


def gemma4(calls: list[Call]) -> str:
    return "".join(f"<|tool_call>call:{name}{_gemma(a)}<tool_call|>" for name, a in calls)


@dataclass(frozen=True)
class FormatCase:
    name: str
    write: Callable[[list[Call]], str]
    value_close: str | None  # the tag that ends a value, for look-alike cases


CASES = [
    FormatCase("qwen3_coder", qwen3_coder, "</parameter>"),
    FormatCase("glm4_5", glm4_5, "</arg_value>"),
    FormatCase("glm4_7", glm4_7, "</arg_value>"),
    FormatCase("minimax_m2", minimax_m2, "</parameter>"),
    FormatCase("hermes", hermes, None),
    FormatCase("seed_oss", seed_oss, "</parameter>"),
    FormatCase("kimi_k2", kimi_k2, None),
    FormatCase("deepseek_v31", deepseek_v31, None),
    FormatCase("deepseek_v32", _dsml("function_calls"), "</｜DSML｜parameter>"),
    FormatCase("deepseek_v4", _dsml("tool_calls"), "</｜DSML｜parameter>"),
    FormatCase("mistral", mistral, None),
    FormatCase("mistral_old", mistral_old, None),
    FormatCase("hy3", _hy3(":opensource"), "</arg_value:opensource>"),
    FormatCase("hy3_preview", _hy3(""), "</arg_value>"),
    FormatCase("harmony", harmony, None),
    FormatCase("gemma4", gemma4, None),
    FormatCase("muse_glimmer", _invokes("atem:function_calls", "atem:invoke", "atem:parameter"), "</atem:parameter>"),
]

WRITE = ("write_file", {"path": "src/ok.py", "content": "def f():\n    return 1\n", "count": 3, "ratio": 0.5,
                        "force": False, "tags": ["a", "b"], "options": {"deep": {"er": [1, {"x": None}]}},
                        "maybe": "None"})
LIST = ("list_dir", {"path": "."})


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request) -> FormatCase:
    return request.param


def parse(case: FormatCase, text: str):
    return parse_both(ToolCallParser(case.name, TOOLS), text)


def calls_of(result) -> list[Call]:
    return [(c.name, c.arguments) for c in result.tool_calls]


def test_every_registered_format_has_a_case():
    assert {c.name for c in CASES} == {fmt.names[0] for fmt in FORMATS.values()}


def test_single_call_every_json_type(case):
    result = parse(case, case.write([WRITE]))
    assert calls_of(result) == [WRITE] and result.content is None
    assert all(c.complete for c in result.tool_calls)


def test_parallel_calls(case):
    result = parse(case, case.write([LIST, WRITE, LIST]))
    assert calls_of(result) == [LIST, WRITE, LIST]


def test_text_before_and_after(case):
    result = parse(case, "Let me look.\n\n" + case.write([LIST]) + "\nDone <3")
    assert calls_of(result) == [LIST]
    assert result.content == "Let me look.\n\n\nDone <3"


def test_no_arguments(case):
    assert calls_of(parse(case, case.write([("get_time", {})]))) == [("get_time", {})]


def test_unicode_names_and_values(case):
    call = ("list_dir", {"path": "données/日本語/🙂 ü\u00a0x"})
    assert calls_of(parse(case, "Voilà 🙂 " + case.write([call]))) == [call]


@pytest.mark.parametrize("value", ["", " ", "\n", "a < b && c > d", "<", "</", "<parameter=x>", "<arg_key>k</arg_key>",
                                   "</function>", "\\n is not a newline", '"quoted"', "tab\there",
                                   "<|tool_call_end|>", "[TOOL_CALLS]x[ARGS]{", "</｜DSML｜invoke>",
                                   '<atem:invoke name="x">', "<tool_call:opensource>", "<|start|>"])
def test_awkward_string_values(case, value):
    call = ("write_file", {"path": "p", "content": value})
    assert calls_of(parse(case, case.write([call]))) == [call]


@pytest.mark.parametrize("case", [c for c in CASES if c.value_close], ids=lambda c: c.name)
def test_value_containing_its_own_closing_tag(case):
    """JSON bodies escape everything; XML values can hold their own closing tag when text follows it."""
    value = f"see {case.value_close} here and {case.value_close}\nthere"
    call = ("write_file", {"path": "p", "content": value})
    assert calls_of(parse(case, case.write([call]))) == [call]


def test_json_looking_strings_stay_strings(case):
    call = ("write_file", {"path": "123", "content": "null", "maybe": "true"})
    assert calls_of(parse(case, case.write([call]))) == [call]


def test_undeclared_tool_is_still_a_call(case):
    call = ("mystery", {"x": "1"})
    assert parse(case, case.write([call])).tool_calls[0].name == "mystery"


def test_malformed_block_goes_back_to_content(case):
    text = f"{case.write([LIST])[:12]} <- looks like a call but is not"
    result = parse(case, text)
    assert result.tool_calls == [] and result.content == text


def test_truncated_output_at_every_cut(case):
    """Cut anywhere: nothing lost, no error, and a cut call never passes for a whole one."""
    text = "Hi " + case.write([LIST, ("write_file", {"path": "a", "content": "x\ny", "count": 2})])
    parser = ToolCallParser(case.name, TOOLS)
    whole = parser.parse(text).tool_calls
    for cut in range(len(text) + 1):
        result = parser.parse(text[:cut])
        check_coverage(text[:cut], result)
        for index, call in enumerate(result.tool_calls):
            assert call.name == whole[index].name
            assert call.arguments.items() <= whole[index].arguments.items() or not call.complete
            if not call.complete:
                assert index == len(result.tool_calls) - 1
                with pytest.raises(ValueError):
                    json.loads(call.arguments_json)
    truncated = parse(case, text[: text.rindex("count")]).tool_calls
    assert [c.complete for c in truncated] == [True, False]
    assert truncated[1].arguments == {"path": "a", "content": "x\ny"}
