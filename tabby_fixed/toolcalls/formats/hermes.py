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

from ..partial import finished_members
from ..scanner import unquote, valid_name
from ..schema import ToolSchemas, conform_json_arguments, loads_json
from .base import Answer, CallFormat, CallSyntax, Decoded, JsonOpened, after_wrapper


class Hermes(CallFormat):
    names = ("hermes", "qwen3", "qwen2_5", "smollm3")
    wrapper_open = "<tool_call>"
    wrapper_close = "</tool_call>"
    call_close = "</tool_call>"
    start_markers = ("<tool_call>",)
    syntax = CallSyntax(trigger="<tool_call>", open_gap="\n", block_close="\n</tool_call>", json_call=True)

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        start = after_wrapper(text, self.wrapper_open, final)
        if not isinstance(start, int):
            return start
        return JsonOpened(start) if text[start] == "{" else None

    def call_from_json(self, body: Any, opened: JsonOpened, schemas: ToolSchemas) -> list[Decoded] | None:
        call = named_call(body, schemas)
        return [call] if call is not None else None

    def call_from_partial_json(self, text: str, opened: JsonOpened,
                               schemas: ToolSchemas) -> tuple[list[Decoded], Decoded | None]:
        return [], cut_named_call(text, 0, schemas)

    def detect(self, chat_template: str) -> bool:
        return "<tool_call>" in chat_template and '"arguments"' in chat_template


def cut_named_call(text: str, start: int, schemas: ToolSchemas) -> Decoded | None:
    """A named call object cut off after its name finished: the call, with the arguments that finished."""
    members, cut = finished_members(text, start)
    name = members.get("name")
    if not isinstance(name, str) or not valid_name(unquote(name)):
        return None
    arguments = members.get("arguments", members.get("parameters"))
    if cut is not None and cut[0] in ("arguments", "parameters") and text.startswith("{", cut[1]):
        arguments, _ = finished_members(text, cut[1])
    name, call_id = unquote(name), members.get("id")
    return Decoded(name, conform_json_arguments(name, arguments if isinstance(arguments, dict) else {}, schemas),
                   call_id if isinstance(call_id, str) and call_id else None)


def named_call(body: Any, schemas: ToolSchemas) -> Decoded | None:
    """``{"name": ..., "arguments": {...}}`` (or ``"parameters"``, or arguments as a JSON string)."""
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
    call_id = body.get("id")
    return Decoded(name, conform_json_arguments(name, dict(arguments), schemas),
                   call_id if isinstance(call_id, str) and call_id else None)

