"""DeepSeek calls: V3.1's JSON after a name, and the DSML markup of V3.2 and V4.

::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>write_file<｜tool▁sep｜>{"path": "a.py"}<｜tool▁call▁end｜>
    <｜tool▁calls▁end｜>                                    (V3.1: no newlines between the tags)

    <｜DSML｜tool_calls>                                   (V3.2: <｜DSML｜function_calls>)
    <｜DSML｜invoke name="write_file">
    <｜DSML｜parameter name="path" string="true">a.py</｜DSML｜parameter>
    <｜DSML｜parameter name="append" string="false">true</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

In DSML the model states each value's type: ``string="true"`` keeps the text exactly whatever the
schema says, ``string="false"`` is JSON read by the schema. ``｜DSML｜`` is one token; the rest of
each tag is ordinary text. Values have no framing newlines.
"""

from __future__ import annotations

import re

from ..scanner import attribute_name, read_header
from .base import Answer, CallSyntax, InvokeCalls, ParamOpened, SectionOfJsonCalls

_STRING_ATTRIBUTE = re.compile(r"""\sstring\s*=\s*["']?true\b""")
_STRING_KIND = frozenset(["string"])
_INVOKE, _PARAMETER, _PARAMETER_CLOSE = "<｜DSML｜invoke", "<｜DSML｜parameter", "</｜DSML｜parameter>"


class DeepSeekV31(SectionOfJsonCalls):
    names = ("deepseek_v31", "deepseek_v3_1")
    wrapper_open = "<｜tool▁calls▁begin｜>"
    wrapper_close = "<｜tool▁calls▁end｜>"
    json_call_close = "<｜tool▁call▁end｜>"
    start_markers = ("<｜tool▁calls▁begin｜>",)
    call_open = "<｜tool▁call▁begin｜>"
    header_close = "<｜tool▁sep｜>"
    syntax = CallSyntax(
        trigger="<｜tool▁calls▁begin｜>", block_close="<｜tool▁calls▁end｜>", shares_block=True, call_separator="",
        call_open=("<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>",), call_close="<｜tool▁call▁end｜>", json_arguments=True)

    def detect(self, chat_template: str) -> bool:
        return "<｜tool▁sep｜>" in chat_template


def _dsml_syntax(wrapper_open: str, wrapper_close: str) -> CallSyntax:
    """DSML calls: each value's opening tag says whether it is a string (free text) or JSON."""
    return CallSyntax(
        trigger=wrapper_open, open_gap="\n", block_close=wrapper_close, shares_block=True, call_separator="",
        call_open=(f"{_INVOKE} name={{name}}>\n",), call_close="</｜DSML｜invoke>\n", quotes=('"',),
        param_open=(f'{_PARAMETER} name={{key}} string="{{string}}">',), value_close=_PARAMETER_CLOSE,
        after_param=("\n",))


class DeepSeekV4(InvokeCalls):
    names = ("deepseek_v4", "dsv4")
    wrapper_open = "<｜DSML｜tool_calls>"
    wrapper_close = "</｜DSML｜tool_calls>"
    call_close = "</｜DSML｜invoke>"
    invoke_tag = _INVOKE
    start_markers = ("<｜DSML｜tool_calls>",)
    param_prefixes = (_PARAMETER,)
    syntax = _dsml_syntax(wrapper_open, wrapper_close)

    def open_param(self, text: str, final: bool) -> Answer:
        header = read_header(text, 0, _PARAMETER, final)
        if not isinstance(header, tuple):
            return header
        attributes, end = header
        key = attribute_name(attributes)
        if not key:
            return None
        return ParamOpened(key, end, _PARAMETER_CLOSE,
                           kind=_STRING_KIND if _STRING_ATTRIBUTE.search(attributes) else None)

    def detect(self, chat_template: str) -> bool:
        return _dsml(chat_template) and "function_calls" not in chat_template


class DeepSeekV32(DeepSeekV4):
    names = ("deepseek_v32", "deepseek_v3_2")
    wrapper_open = "<｜DSML｜function_calls>"
    wrapper_close = "</｜DSML｜function_calls>"
    start_markers = ("<｜DSML｜function_calls>",)
    syntax = _dsml_syntax(wrapper_open, wrapper_close)

    def detect(self, chat_template: str) -> bool:
        return _dsml(chat_template) and "function_calls" in chat_template


def _dsml(chat_template: str) -> bool:
    return "｜DSML｜" in chat_template or "dsml_token" in chat_template
