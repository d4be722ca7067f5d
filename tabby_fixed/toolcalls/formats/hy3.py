"""Tencent Hy3 (Hunyuan 3) calls: GLM-style keys and values inside ``<tool_calls>``.

::

    <tool_calls:opensource>
    <tool_call:opensource>write_file<tool_sep:opensource>
    <arg_key:opensource>path</arg_key:opensource>
    <arg_value:opensource>a.py</arg_value:opensource>
    </tool_call:opensource>
    </tool_calls:opensource>

The shipping tokenizer's structural tokens all end in ``:opensource`` (``token_suffix`` in its
``tokenizer_config.json``); the preview template and tokenizer use the bare tags. They are two
registered formats: ``hy3`` (alias ``hy_v3``) for the shipping tokens, ``hy3_preview`` for the bare
ones; detection tells them apart by the template. Values are raw text; non-strings are JSON.
"""

from __future__ import annotations

from ..scanner import valid_name
from .base import Answer, CallSyntax, Opened, SectionOfCalls
from .glm4_5 import key_value_param


class Hy3(SectionOfCalls):
    names: tuple[str, ...] = ("hy3", "hy_v3")
    suffix = ":opensource"

    def __init__(self) -> None:
        tag = self.suffix
        self.wrapper_open, self.wrapper_close = f"<tool_calls{tag}>", f"</tool_calls{tag}>"
        self.call_open, self.call_close = f"<tool_call{tag}>", f"</tool_call{tag}>"
        self.header_close = f"<tool_sep{tag}>"
        self.start_markers = (self.wrapper_open,)
        self.param_prefixes = (f"<arg_key{tag}>", f"<arg_value{tag}>")
        self.reasoning_tags = ((f"<think{tag}>", f"</think{tag}>"),)
        self.syntax = CallSyntax(
            trigger=self.wrapper_open, open_gap="\n", block_close=self.wrapper_close, shares_block=True,
            call_separator="", call_open=(f"{self.call_open}{{name}}{self.header_close}\n",),
            call_close=f"{self.call_close}\n", param_open=(f"<arg_key{tag}>{{key}}</arg_key{tag}>\n<arg_value{tag}>",),
            value_close=f"</arg_value{tag}>", after_param=("\n",), json_param_open=(f"<arg_value{tag}>",))

    def opened(self, text: str, header: str, end: int, final: bool) -> Answer:
        return Opened(header, end, wrapped=True) if valid_name(header) else None

    def open_param(self, text: str, final: bool) -> Answer:
        return key_value_param(text, final, self.suffix, self.call_close)

    def detect(self, chat_template: str) -> bool:
        return self.header_close in chat_template


class Hy3Preview(Hy3):
    names = ("hy3_preview",)
    suffix = ""

    def detect(self, chat_template: str) -> bool:
        return self.header_close in chat_template and ":opensource" not in chat_template
