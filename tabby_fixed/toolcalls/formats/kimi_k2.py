"""Kimi K2 / K2-Thinking / Kimi-Linear calls: a JSON arguments object after an id naming the tool.

::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>
    {"path": "a.py"}<|tool_call_end|><|tool_calls_section_end|>      (no newlines between the tags)

The id ``functions.NAME:IDX`` is the model's own: the template renders it back in history and in
each result (``## Return of functions.write_file:0``), so it is returned to the client unchanged
as the call's id, and the tool's name is read out of it.
"""

from __future__ import annotations

import re

from .base import CallSyntax, SectionOfJsonCalls

_ID = re.compile(r"(?:functions\.)?(?P<name>.+?)(?::\d+)?\Z", re.S)


class KimiK2(SectionOfJsonCalls):
    names = ("kimi_k2", "kimi", "kimi_linear")
    wrapper_open = "<|tool_calls_section_begin|>"
    wrapper_close = "<|tool_calls_section_end|>"
    json_call_close = "<|tool_call_end|>"
    start_markers = ("<|tool_calls_section_begin|>",)
    call_open = "<|tool_call_begin|>"
    header_close = "<|tool_call_argument_begin|>"
    syntax = CallSyntax(
        trigger="<|tool_calls_section_begin|>", block_close="<|tool_calls_section_end|>", shares_block=True,
        call_separator="", call_open=("<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>",),
        call_close="<|tool_call_end|>", json_arguments=True)

    def named(self, header: str) -> tuple[str, str | None]:
        match = _ID.match(header)
        return (match.group("name") if match else header), header

    def detect(self, chat_template: str) -> bool:
        return "<|tool_calls_section_begin|>" in chat_template
