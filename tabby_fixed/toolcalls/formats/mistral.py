"""Mistral calls: ``[TOOL_CALLS]name[ARGS]{json}`` (tokenizer v11+) and the older JSON list.

::

    [TOOL_CALLS]write_file[ARGS]{"path": "a.py"}[TOOL_CALLS]list_dir[ARGS]{"path": "."}
    [TOOL_CALLS]write_file[CALL_ID]a1b2c3d4e[ARGS]{"path": "a.py"}          (Mistral Small 3.2)
    [TOOL_CALLS][{"name": "write_file", "arguments": {"path": "a.py"}, "id": "a1b2c3d4e"}]   (mistral_old)

Devstral, Magistral, Ministral 3, Mistral Small 3.2+ and Large 3 write the first form; Mistral 7B
v0.3, Nemo and Small 3.0/3.1 the list. There is no closing tag: a call ends with its JSON. Ids
the model wrote (``[CALL_ID]``, ``"id"``) are returned as the call ids; calls without one get a
nine-character id, the shape Mistral's templates expect back.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

from ..partial import finished_items
from ..schema import ToolSchemas
from .base import Answer, CallFormat, CallSyntax, Decoded, JsonOpened, after_wrapper, between_tags, json_arguments
from .hermes import cut_named_call, named_call

_TOOL_CALLS, _ARGS, _CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
_ID_ALPHABET = string.ascii_letters + string.digits


class _MistralIds(CallFormat):
    """Mistral's templates and tokenizers expect call ids of nine letters and digits."""

    def new_call_id(self) -> str | None:
        return "".join(secrets.choice(_ID_ALPHABET) for _ in range(9))


class Mistral(_MistralIds):
    names = ("mistral",)
    syntax = CallSyntax(trigger=_TOOL_CALLS, block_close="", block_separator="", call_open=("{name}" + _ARGS,),
                        json_arguments=True)
    wrapper_open = _TOOL_CALLS
    start_markers = (_TOOL_CALLS,)
    reasoning_tags = (("[THINK]", "[/THINK]"),)

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        header = between_tags(text, 0, _TOOL_CALLS, _ARGS, final)
        if not isinstance(header, tuple):
            return header
        name, _, call_id = header[0].partition(_CALL_ID)
        return json_arguments(text, header[1], final, name.strip(), call_id.strip() or None)

    def detect(self, chat_template: str) -> bool:
        return _TOOL_CALLS in chat_template and _ARGS in chat_template


class MistralOld(_MistralIds):
    names = ("mistral_old",)
    wrapper_open = _TOOL_CALLS
    start_markers = (_TOOL_CALLS,)

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        start = after_wrapper(text, _TOOL_CALLS, final)
        if not isinstance(start, int):
            return start
        return JsonOpened(start) if text[start] in "[{" else None

    def call_from_json(self, body: Any, opened: JsonOpened, schemas: ToolSchemas) -> list[Decoded] | None:
        calls = [named_call(item, schemas) for item in (body if isinstance(body, list) else [body])]
        decoded = [call for call in calls if call is not None]
        return decoded if decoded and len(decoded) == len(calls) else None

    def call_from_partial_json(self, text: str, opened: JsonOpened,
                               schemas: ToolSchemas) -> tuple[list[Decoded], Decoded | None]:
        """The list's calls that finished, and the one cut after its name."""
        if text.startswith("{"):
            return [], cut_named_call(text, 0, schemas)
        items, cut = finished_items(text)
        named = [named_call(item, schemas) for item in items]
        whole = [call for call in named if call is not None]
        if len(whole) != len(named):
            return [], None
        cut_call = cut_named_call(text, cut, schemas) if cut is not None else None
        return whole, cut_call

    def detect(self, chat_template: str) -> bool:
        return _TOOL_CALLS in chat_template and _ARGS not in chat_template
