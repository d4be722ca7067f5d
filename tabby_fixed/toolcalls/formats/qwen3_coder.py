"""Qwen3-Coder XML calls, also written by Qwen3.5/3.6 and Step-3.5/3.7.

::

    <tool_call>
    <function=write_file>
    <parameter=path>
    a.py
    </parameter>
    <parameter=content>
        return x
    </parameter>
    </function>
    </tool_call>

The template frames every value with one newline on each side. Models also write quoted names
(``<parameter="path">``), attribute spellings (``<parameter name="path">``), a nameless
``<parameter>{json}</parameter>`` or ``<arg_value>{json}</arg_value>``, and a bare
``<function=NAME>`` block with no wrapper, which counts as a call only when NAME is a declared
tool and the body starts with a parameter or ``</function>``.
"""

from __future__ import annotations

from ..scanner import NEED, skip_space, starts
from ..schema import ToolSchemas
from .base import Answer, CallFormat, CallSyntax, Opened, header_call, parameter_tag, wrapped_header_call

_FUNCTION = "<function="


class Qwen3Coder(CallFormat):
    names: tuple[str, ...] = ("qwen3_coder", "qwen3_5", "step3_5", "step3_7")
    wrapper_open = "<tool_call>"
    wrapper_close = "</tool_call>"
    call_close = "</function>"
    start_markers = ("<tool_call>", _FUNCTION)
    param_prefixes = ("<parameter", "<arg_value>")
    framing = True
    syntax = CallSyntax(
        trigger="<tool_call>", open_gap="\n", block_close="</tool_call>", call_open=("<function={name}>\n",),
        call_close="</function>\n", quotes=("", '"'), param_open=("<parameter={key}>\n", "<parameter name={key}>\n"),
        value_close="\n</parameter>", after_param=("\n",), json_param_open=("<parameter>\n",))

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        if text.startswith(_FUNCTION):
            return self._bare_call(text, final, schemas)
        return wrapped_header_call(text, final, self.wrapper_open, _FUNCTION)

    def _bare_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        header = header_call(text, 0, _FUNCTION, final, wrapped=False)
        if not isinstance(header, Opened):
            return header
        if not schemas.declares(header.name):
            return None
        body = skip_space(text, header.length)
        if body == len(text):
            return None if final else NEED
        for start in ("<parameter", self.call_close):
            found = starts(text, body, start, final)
            if found is True:
                return header
            if found is NEED:
                return NEED
        return None

    def open_next_call(self, text: str, final: bool) -> Answer:
        return header_call(text, 0, _FUNCTION, final, wrapped=True)

    def open_param(self, text: str, final: bool) -> Answer:
        return parameter_tag(text, final, self.call_close, json_value_tag="<arg_value>")

    def detect(self, chat_template: str) -> bool:
        return "<function=" in chat_template and "<parameter=" in chat_template \
            and "<seed:tool_call>" not in chat_template
