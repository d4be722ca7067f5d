"""Hermes JSON calls: Qwen3 (2504), Qwen2.5, QwQ, SmolLM3.

::

    <tool_call>
    {"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\\n"}}
    </tool_call>

The call is one JSON object, so it is known only once the object is complete; the parser
tracks the object's end itself, so a ``</tool_call>`` inside a string value cannot cut it short.
A string parameter that arrived as a JSON number or boolean gets its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..scanner import NEED, skip_space, starts, unquote, valid_name
from ..schema import ToolSchemas, conform_json_arguments, loads_json
from .base import Answer, CallFormat, CallSyntax, JsonOpened


class Hermes(CallFormat):
    names = ("hermes", "qwen3", "qwen2_5", "smollm3")
    wrapper_open = "<tool_call>"
    wrapper_close = "</tool_call>"
    call_close = "</tool_call>"
    start_markers = ("<tool_call>",)
    syntax = CallSyntax(trigger="<tool_call>", open_gap="\n", block_close="\n</tool_call>", json_call=True)

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        opened = starts(text, 0, self.wrapper_open, final)
        if opened is not True:
            return opened or None
        start = skip_space(text, len(self.wrapper_open))
        if start == len(text):
            return None if final else NEED
        return JsonOpened(start) if text[start] == "{" else None

    def call_from_json(self, body: Any, schemas: ToolSchemas) -> tuple[str, dict[str, Any]] | None:
        if not isinstance(body, Mapping) or not isinstance(body.get("name"), str):
            return None
        name = unquote(body["name"])
        arguments = body.get("arguments", body.get("parameters", {}))
        if isinstance(arguments, str):  # as strictly as the object itself: no NaN, bounded depth
            try:
                arguments = loads_json(arguments)
            except (ValueError, RecursionError):
                return None
        if not valid_name(name) or not isinstance(arguments, Mapping):
            return None
        return name, conform_json_arguments(name, dict(arguments), schemas)

    def detect(self, chat_template: str) -> bool:
        return "<tool_call>" in chat_template and '"arguments"' in chat_template
