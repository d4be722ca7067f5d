"""Model text to one event stream: reasoning, content and tool calls, for every route.

Text goes through the reasoning splitter first (when the model reasons), then what is not
reasoning goes through the tool-call parser (when the request can get calls). Routes map the
events to their own wire shapes and never parse model text themselves. Event order::

    ReasoningDelta* ... ContentDelta* ... (ToolCallBegin ToolCallArgs* ToolCallEnd)* ...

with content and calls interleaved as the model wrote them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .reasoning import ChannelSplitter, ReasoningDelta, ReasoningSplitter
from .toolcalls import ContentDelta, ToolCall, ToolCallArgs, ToolCallBegin, ToolCallEnd, ToolCallParser
from .toolcalls.formats.base import MessageChannels

OutputEvent = ReasoningDelta | ContentDelta | ToolCallBegin | ToolCallArgs | ToolCallEnd
_CALL_EVENTS = (ToolCallBegin, ToolCallArgs, ToolCallEnd)
_LEADING_LINES = re.compile(r"\A\s*\n")


@dataclass(frozen=True)
class ReasoningSettings:
    start_in_reasoning: bool
    start_tag: str = "<think>"
    end_tag: str = "</think>"
    calls_end_reasoning: bool = True  # a call's opening tag inside reasoning ends it


@dataclass
class ChatOutput:
    reasoning: str | None = None
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


#: Told each generation's parsed output at its end, and whether text that opens a call (the
#: format's call tag) stayed in the content because it did not parse as one. For metrics.
ParsedCallback = Callable[[ChatOutput, bool], None]


class OutputParser:
    """One generation's text, fed as it arrives; ``close`` at the end of generation.

    ``first_call_only`` serves ``parallel_tool_calls: false``: calls after the first are left out.
    ``channels`` (formats whose answer is channelled messages) replaces the reasoning settings.
    """

    def __init__(self, *, tool_parser: ToolCallParser | None = None, reasoning: ReasoningSettings | None = None,
                 first_call_only: bool = False, on_parsed: ParsedCallback | None = None,
                 channels: MessageChannels | None = None) -> None:
        self._tools = tool_parser.stream() if tool_parser is not None else None
        self._call_start = tool_parser.call_start if tool_parser is not None else None
        self._on_parsed = on_parsed
        self._splitter: ReasoningSplitter | ChannelSplitter | None = None
        if channels is not None:  # the format's messages say what is reasoning (harmony)
            self._splitter = ChannelSplitter(channels)
        elif reasoning is not None:
            exits = (tool_parser.call_start,) if tool_parser is not None and reasoning.calls_end_reasoning else ()
            self._splitter = ReasoningSplitter(reasoning.start_in_reasoning, reasoning.start_tag, reasoning.end_tag,
                                               exit_tags=exits)
        self._first_call_only = first_call_only
        self._content: list[str] = []
        self._new_call_id = tool_parser.format.new_call_id if tool_parser is not None else None
        self._call_ids: dict[int, str] = {}  # ids made here for calls the model gave none

    def feed(self, text: str) -> list[OutputEvent]:
        return self._route(self._splitter.feed(text) if self._splitter else [ContentDelta(text)], final=False)

    def close(self) -> list[OutputEvent]:
        events = self._route(self._splitter.close() if self._splitter else [], final=True)
        if self._on_parsed is not None:
            output = self.result()
            self._on_parsed(output, bool(self._call_start and output.content and self._call_start in output.content))
        return events

    def result(self) -> ChatOutput:
        reasoning = self._splitter.reasoning if self._splitter else None
        if self._tools is None:
            content = "".join(self._content)
            return ChatOutput(reasoning, content if content.strip() else None)
        parsed = self._tools.result
        calls = [replace(call, call_id=self._call_ids[index]) if index in self._call_ids else call
                 for index, call in enumerate(parsed.tool_calls)]
        return ChatOutput(reasoning, parsed.content, calls[:1] if self._first_call_only else calls)

    def _route(self, pieces: list[ReasoningDelta | ContentDelta], final: bool) -> list[OutputEvent]:
        events: list[OutputEvent] = []
        for piece in pieces:
            if isinstance(piece, ContentDelta) and self._tools is not None:
                events += self._tools.feed(piece.text)
            else:
                events.append(piece)
                if isinstance(piece, ContentDelta):
                    self._content.append(piece.text)
        if final and self._tools is not None:
            events += self._tools.close()
        events = [self._with_id(e) if isinstance(e, ToolCallBegin) and e.call_id is None else e for e in events]
        if self._first_call_only:
            events = [e for e in events if not isinstance(e, _CALL_EVENTS) or e.index == 0]
        return events


    def _with_id(self, begin: ToolCallBegin) -> ToolCallBegin:
        """A call the model gave no id, with one in the shape its format needs (Mistral), if any."""
        call_id = self._new_call_id() if self._new_call_id is not None else None
        if call_id is None:
            return begin
        self._call_ids[begin.index] = call_id
        return replace(begin, call_id=call_id)


class BlockText:
    """Text for answers made of blocks (Anthropic content blocks, Responses output items), where
    the blank lines a model writes around its thoughts and calls would become empty blocks or
    trail the text.

    Whitespace is held until visible text follows it. A block starts with its first visible
    line (indentation on that line stays); whitespace before a call or the end of the answer is
    dropped (``drop``). Between visible pieces, nothing is lost.
    """

    def __init__(self) -> None:
        self._held = ""

    def text(self, piece: str, block_open: bool) -> str | None:
        """The text to send now for ``piece``; None while only whitespace is held."""
        held = self._held + piece
        if not block_open:
            if not held.strip():
                self._held = held
                return None
            held = _LEADING_LINES.sub("", held)
        body = held.rstrip()
        self._held = held[len(body):]
        return body or None

    def drop(self) -> None:
        self._held = ""
