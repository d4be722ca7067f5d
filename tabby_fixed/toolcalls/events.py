"""What the parser produces: stream events and the final result.

Events for one call always come in this order: one ``ToolCallBegin``, any number of
``ToolCallArgs`` whose fragments concatenate to the call's ``arguments_json``, one
``ToolCallEnd``. ``ContentDelta`` carries text outside calls and may come between calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ContentDelta:
    text: str


@dataclass(frozen=True)
class ToolCallBegin:
    index: int
    name: str
    call_id: str | None = None  # the model's own id for the call (Kimi, Mistral); None: the server makes one


@dataclass(frozen=True)
class ToolCallArgs:
    index: int
    fragment: str


@dataclass(frozen=True)
class ToolCallEnd:
    index: int


Event = ContentDelta | ToolCallBegin | ToolCallArgs | ToolCallEnd


@dataclass(frozen=True)
class ToolCall:
    """One parsed call.

    ``arguments_json`` is exactly what was streamed. For a complete call it equals
    ``json.dumps(arguments, ensure_ascii=False)``; for a call cut off by the end of generation
    (``complete=False``) it is the deliberately unterminated JSON streamed so far, while
    ``arguments`` holds the parameters that did finish. ``raw`` is the model's text of the call.
    ``call_id`` is the id the model wrote for the call, for formats whose model refers back to it
    (Kimi's ``functions.NAME:IDX``); None otherwise.
    """

    name: str
    arguments: dict[str, Any]
    arguments_json: str
    complete: bool
    raw: str
    call_id: str | None = None


@dataclass(frozen=True)
class ParseResult:
    """Text outside calls (None when empty or whitespace only) and the calls, in order."""

    content: str | None
    tool_calls: list[ToolCall]
