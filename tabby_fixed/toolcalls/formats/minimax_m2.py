"""MiniMax-M2 / M2.1 / M2.5 calls.

::

    <minimax:tool_call>
    <invoke name="write_file">
    <parameter name="path">a.py</parameter>
    <parameter name="content">print("hi")</parameter>
    </invoke>
    </minimax:tool_call>

Several ``<invoke>`` blocks may share one wrapper. Values are raw text with no framing newlines.
"""

from __future__ import annotations

from .base import Answer, CallSyntax, InvokeCalls, parameter_tag

_INVOKE = "<invoke"


class MiniMaxM2(InvokeCalls):
    names = ("minimax_m2", "minimax_m2_1", "minimax_m2_5")
    wrapper_open = "<minimax:tool_call>"
    wrapper_close = "</minimax:tool_call>"
    call_close = "</invoke>"
    invoke_tag = _INVOKE
    start_markers = ("<minimax:tool_call>",)
    param_prefixes = ("<parameter",)
    syntax = CallSyntax(
        trigger="<minimax:tool_call>", open_gap="\n", block_close="</minimax:tool_call>", shares_block=True,
        call_separator="", call_open=("<invoke name={name}>\n",), call_close="</invoke>\n",
        quotes=('"', "'", ""),
        param_open=("<parameter name={key}>",), value_close="</parameter>", after_param=("\n",),
        json_param_open=("<parameter>",))

    def open_param(self, text: str, final: bool) -> Answer:
        return parameter_tag(text, final, self.call_close)

    def detect(self, chat_template: str) -> bool:
        return self.wrapper_open in chat_template
