"""The tool-call parser: one state machine for streaming and non-streaming.

``parse(text)`` is ``stream()`` fed the whole text in one piece, so both modes agree by
construction. Every character fed ends up in exactly one place: content, or the ``raw`` text of
one call. A call becomes visible (``ToolCallBegin``) only once its header, name included, is
complete; before that, text that turns out not to be a call is released as content.

States::

    TEXT ──start marker + header──▶ BODY ──parameter tag──▶ VALUE
      ▲   ├─JSON-bodied start──▶ JSON ──object complete──▶ BETWEEN
      │   └─header naming a JSON-bodied call──▶ ARGS ──object's '}'──▶ BETWEEN
      │                                                      │
      └──────── anything else ◀── BETWEEN ◀── closing tag ── BODY ◀── value's closing tag

A JSON-bodied call whose header names it (Kimi, Mistral, gpt-oss) begins at once, and ARGS
reads its arguments object as it arrives. One named by its value (Hermes), or whose body is not
JSON (Gemma 4, up to a tag), is held in JSON until its value is complete, then begins and ends
at once; BETWEEN may open the next one. The model's own call id comes with the name. Cut off by
the end of generation, a call is still a call, with ``complete=False``, once its name is known.

All positions are absolute indices into ``_buffer``; what is before ``_pos`` is decided, and
``_take(n)`` moves ``_pos`` on by n without copying the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

from .events import (
    ContentDelta,
    Event,
    ParseResult,
    ToolCall,
    ToolCallArgs,
    ToolCallBegin,
    ToolCallEnd,
)
from .formats import CallFormat, get_format
from .formats.base import Decoded, JsonOpened, Opened, ParamOpened
from .incremental import ESCAPE_LIMIT, SCALAR_END, STRING_STOP, JsonArguments, Phase, TagEnd, escape_size
from .scanner import HEADER_LIMIT, NEED, scan, skip_space, starts
from .schema import (
    JSON_DECODER,
    Choices,
    Kind,
    ToolSchemas,
    conform_json_arguments,
    convert_value,
    loads_json,
    streams_as_text,
)

#: Whitespace after a value's closing tag waited through before the tag is taken as the end.
_CLOSE_LOOKAHEAD = 256
#: What JSON text may hold outside strings besides brackets and quotes: whitespace, separators,
#: numbers and the letters of true, false and null.
_BETWEEN_STRINGS = frozenset(" \t\n\r,:+-.0123456789eEtruefalsn")
#: Text a format is shown when asked about a tag: a tag (headers, the whitespace around them)
#: longer than this is not a tag. It keeps every question about the front of the buffer bounded.
_WINDOW = 8 * HEADER_LIMIT


class _State(Enum):
    TEXT = auto()  # outside calls: content until a start marker
    JSON = auto()  # a JSON-bodied call whose object is not complete yet (still undecided)
    ARGS = auto()  # the JSON arguments object of a call its header named, read as it arrives
    BODY = auto()  # inside a call, between parameters
    VALUE = auto()  # inside a parameter's value
    BETWEEN = auto()  # a call just closed: its wrapper's close tag or the next call may follow


@dataclass
class _Call:
    index: int
    name: str
    wrapped: bool
    call_id: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    emitted_keys: set[str] = field(default_factory=set)
    json_parts: list[str] = field(default_factory=list)
    raw_parts: list[str] = field(default_factory=list)
    complete: bool = False

    def result(self) -> ToolCall:
        return ToolCall(self.name, self.arguments, "".join(self.json_parts), self.complete,
                        "".join(self.raw_parts), self.call_id)


@dataclass
class _Param:
    key: str | None  # None: nameless, its JSON object spreads into arguments
    kind: Kind
    choices: Choices  # the schema's enum or const
    close_tag: str
    ends_before: tuple[str, ...]  # tags that end the value and stay for the call
    skipped: bool  # a repeated key: the first occurrence wins
    streams: bool  # a string parameter: its text streams as it arrives
    parts: list[str] = field(default_factory=list)
    started: bool = False  # the first character arrived (a framing newline is dropped)
    held_newline: bool = False  # a trailing newline that may be the framing one


class _JsonEnd:
    """A JSON-bodied call's text while its object is incomplete, and where the object ends.

    The text grows as a list of pieces, each scanned once, so a long call costs time linear in
    its length; it is joined only when the object is complete (or generation ends).

    A character that can be in no JSON text outside a string (``<``, ``\\``, letters other than
    those of true, false and null) makes the candidate ``broken`` there and its scan stops. Every
    start marker begins with such a character or with ``[`` and one (``[TOOL_CALLS]``), so a
    candidate never scans past a later one unless that one sits inside the candidate's string,
    and then the two read the text in opposite string states until one of them breaks: each
    character is scanned by at most a few candidates, and ``<tool_call>{`` or ``[TOOL_CALLS][{``
    repeated costs linear time, not quadratic.
    """

    def __init__(self, text: str, start: int) -> None:
        self.start = start  # where the object begins in the text
        self._pieces = [text]
        self._offset = 0  # where the first unscanned piece begins in the text
        self._unscanned = 0  # index of the first piece not fully scanned
        self._position = start  # next character to scan, in the whole text
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self.broken = False

    def add(self, delta: str) -> None:
        self._pieces.append(delta)

    def text(self) -> str:
        joined = "".join(self._pieces)
        self._pieces = [joined]
        self._offset, self._unscanned = 0, 0
        return joined

    def end(self) -> int | None:
        """Index just after the object's closing brace, once it has arrived."""
        while self._unscanned < len(self._pieces):
            piece = self._pieces[self._unscanned]
            for local in range(self._position - self._offset, len(piece)):
                if self._step(piece[local]):
                    return self._offset + local + 1
                if self.broken:
                    return None
            self._offset += len(piece)
            self._position = self._offset
            self._unscanned += 1
        return None

    def _step(self, char: str) -> bool:
        """Read one character; True when it closes the object."""
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
        elif char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
            return self._depth == 0
        elif char not in _BETWEEN_STRINGS:
            self.broken = True
        return False


def _escape(text: str) -> str:
    """The JSON string escaping of text, without quotes; it is per character, so pieces concatenate."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class ToolCallStream:
    """Incremental parse of one generation. ``feed`` any pieces, then ``close`` once."""

    def __init__(self, call_format: CallFormat, schemas: ToolSchemas) -> None:
        self._format = call_format
        self._schemas = schemas
        self._buffer = ""  # text fed; what is before _pos is decided
        self._pos = 0  # taking text moves this instead of copying the rest of the buffer
        self._state = _State.TEXT
        self._calls: list[_Call] = []
        self._call: _Call | None = None  # the call being read
        self._param: _Param | None = None  # the parameter being read
        self._json: _JsonEnd | TagEnd | None = None  # the JSON-bodied call being read
        self._json_opened = JsonOpened(0)  # how it opened
        self._arguments = JsonArguments()  # the streamed JSON arguments being read
        self._content: list[str] = []
        self._events: list[Event] = []
        self._parts: list[list[str]] = []  # per event, the pieces merged into it (joined once, in _flush)
        self._closed = False
        self._steps = {
            _State.TEXT: self._step_text,
            _State.JSON: self._step_json,
            _State.ARGS: self._step_args,
            _State.BODY: self._step_body,
            _State.VALUE: self._step_value,
            _State.BETWEEN: self._step_between,
        }

    def feed(self, delta: str) -> list[Event]:
        if self._closed:
            raise RuntimeError("feed() after close()")
        if self._json is not None:  # a JSON body grows without rebuilding the buffer
            self._json.add(delta)
        else:  # what is undecided is bounded, so this copy is too
            self._buffer, self._pos = self._buffer[self._pos:] + delta, 0
        self._run(final=False)
        return self._flush()

    def close(self) -> list[Event]:
        """End of generation: release what was held; a call still open was cut off."""
        if self._closed:
            return []
        self._run(final=True)
        call = self._call
        if call is not None:
            self._to_call(self._take(len(self._buffer) - self._pos))  # a cut escape or number: the call's text
            if self._param is not None and self._param.held_newline:
                self._args(_escape("\n"))
            self._emit(ToolCallEnd(call.index))
            self._call = None
        self._closed = True
        return self._flush()

    @property
    def result(self) -> ParseResult:
        if not self._closed:
            raise RuntimeError("result is known only after close()")
        content = "".join(self._content)
        return ParseResult(content if content.strip() else None, [c.result() for c in self._calls])

    # -- driving ------------------------------------------------------------------------------

    def _run(self, final: bool) -> None:
        while self._steps[self._state](final):
            pass

    def _take(self, size: int) -> str:
        piece = self._buffer[self._pos:self._pos + size]
        self._pos += len(piece)
        return piece

    def _ask(self, question: Any, final: bool, *args: Any, at: int = 0) -> Any:
        """A format's answer about the text at ``_pos + at``, shown at most ``_WINDOW`` characters
        of it: past the window the text counts as ended, so the answer cannot be NEED."""
        start = self._pos + at
        window = self._buffer[start:start + _WINDOW]
        return question(window, final or start + _WINDOW < len(self._buffer), *args)

    def _step_text(self, final: bool) -> bool:
        size, marker = scan(self._buffer, self._format.start_markers, final, self._pos)
        self._to_content(self._take(size))
        if marker is None:
            return False
        answer = self._ask(self._format.open_call, final, self._schemas)
        if answer is NEED:
            return False
        if isinstance(answer, JsonOpened):
            self._open_json(answer, 0)
        elif isinstance(answer, Opened):
            self._begin_call(answer)
        else:
            self._to_content(self._take(1))
        return True

    def _open_json(self, opened: JsonOpened, leading: int) -> None:
        """A JSON-bodied call whose header starts ``leading`` characters after ``_pos``."""
        if opened.name is not None and not opened.until:  # named already: its arguments stream
            self._begin_call(Opened(opened.name, opened.length, wrapped=True, call_id=opened.call_id),
                             leading=self._take(leading))
            self._arguments = JsonArguments()
            self._state = _State.ARGS
            return
        start = self._pos + leading + opened.length
        self._json = TagEnd(self._buffer, start, opened.until) if opened.until else _JsonEnd(self._buffer, start)
        self._json_opened = opened
        self._state = _State.JSON

    def _step_json(self, final: bool) -> bool:
        assert self._json is not None
        end, broken = self._json.end(), self._json.broken
        if end is None and not final and not broken:
            return False
        self._buffer = self._json.text()
        start, opened = self._json.start, self._json_opened
        self._json = None
        rest = len(self._buffer) - self._pos
        if end is None and not broken:  # cut off by the end of generation
            whole, cut = self._format.call_from_partial_json(self._buffer[start:], opened, self._schemas)
            for number, call in enumerate(whole):
                self._decoded_call(call, rest if number == 0 else 0)
                self._close_call(_State.BETWEEN)
            if cut is not None:
                self._decoded_call(cut, 0 if whole else rest)
                return False
            if whole:
                self._state = _State.TEXT
                return False
        elif end is not None:
            try:
                body = self._format.decode_body(self._buffer[start:end])
            except (ValueError, RecursionError):
                body = None
            calls = self._format.call_from_json(body, opened, self._schemas)
            if calls:  # a JSON list may hold several; the first call's raw text holds them all
                for number, call in enumerate(calls):
                    self._decoded_call(call, end - self._pos if number == 0 else 0)
                    self._close_call(_State.BETWEEN)
                return True
        self._state = _State.TEXT
        self._to_content(self._take(1))
        return True

    def _decoded_call(self, call: Decoded, length: int) -> None:
        self._begin_call(Opened(call.name, length, wrapped=True, call_id=call.call_id))
        for key, value in call.arguments.items():
            self._add_argument(key, value)

    # -- JSON arguments, streamed --------------------------------------------------------------

    def _step_args(self, final: bool) -> bool:
        """One step through the arguments object: its members are read as they arrive, string
        values streamed, other values emitted once complete (and typed by the schema)."""
        reader = self._arguments
        if reader.phase is Phase.STRING:
            return self._args_string(final)
        if reader.phase is Phase.NESTED:
            return self._args_nested(final)
        if reader.phase is Phase.SCALAR:
            return self._args_scalar(final)
        self._to_call(self._take(skip_space(self._buffer, self._pos) - self._pos))
        if self._pos == len(self._buffer):
            return False
        char = self._buffer[self._pos]
        if reader.phase is Phase.AFTER and char == ",":
            self._to_call(self._take(1))
            reader.phase, reader.first = Phase.KEY, False
        elif char == "}" and (reader.phase is Phase.AFTER or (reader.phase is Phase.KEY and reader.first)):
            self._to_call(self._take(1))
            self._close_call(_State.BETWEEN)
        elif reader.phase is Phase.OPEN and char == "{":
            self._to_call(self._take(1))
            reader.phase = Phase.KEY
        elif reader.phase is Phase.KEY and char == '"':
            return self._args_key(final)
        elif reader.phase is Phase.COLON and char == ":":
            self._to_call(self._take(1))
            reader.phase = Phase.VALUE
        elif reader.phase is Phase.VALUE:
            self._args_value_start(char)
        else:
            return self._args_broken()
        return True

    def _args_key(self, final: bool) -> bool:
        try:
            key, end = JSON_DECODER.raw_decode(self._buffer, self._pos)
        except (ValueError, RecursionError):
            if final or len(self._buffer) - self._pos > HEADER_LIMIT:
                return self._args_broken()
            return False
        self._to_call(self._take(end - self._pos))
        self._arguments.key, self._arguments.phase = key, Phase.COLON
        return True

    def _args_value_start(self, char: str) -> None:
        reader, call = self._arguments, self._call
        assert call is not None
        reader.skipped = reader.key in call.emitted_keys
        if char == '"':
            self._to_call(self._take(1))
            reader.parts, reader.phase = [], Phase.STRING
            if not reader.skipped:
                self._emit_key(reader.key)
                self._args('"')
        elif char in "{[":
            self._json, reader.phase = _JsonEnd(self._buffer, self._pos), Phase.NESTED
        else:
            reader.phase = Phase.SCALAR

    def _args_string(self, final: bool) -> bool:
        reader, call = self._arguments, self._call
        assert call is not None
        stop = STRING_STOP.search(self._buffer, self._pos)
        self._args_text(self._take((stop.start() if stop else len(self._buffer)) - self._pos))
        if stop is None:
            return False
        if self._buffer[self._pos] == '"':
            self._to_call(self._take(1))
            if not reader.skipped:
                self._args('"')
                call.arguments[reader.key] = "".join(reader.parts)
            reader.phase = Phase.AFTER
            return True
        size = escape_size(self._buffer[self._pos:self._pos + ESCAPE_LIMIT])
        if size is None:
            return False
        try:
            text = loads_json(f'"{self._buffer[self._pos:self._pos + size]}"')
        except ValueError:
            return self._args_broken()
        self._args_text(self._take(size), text)
        return True

    def _args_text(self, raw: str, text: str | None = None) -> None:
        """String text as written (raw) and what it means (text; raw itself when no escape)."""
        if not raw:
            return
        self._to_call(raw)
        text = raw if text is None else text
        if not self._arguments.skipped:
            self._arguments.parts.append(text)
            self._args(_escape(text))

    def _args_scalar(self, final: bool) -> bool:
        """A number or literal ends at space, ``,``, ``}`` or ``]``; one longer than a header is
        not a value (and looking for its end again at every piece would cost quadratic time)."""
        found = SCALAR_END.search(self._buffer, self._pos, self._pos + HEADER_LIMIT + 1)
        if found is not None:
            return self._args_value(self._buffer[self._pos:found.start()])
        if len(self._buffer) - self._pos > HEADER_LIMIT:
            return self._args_broken()
        return False

    def _args_nested(self, final: bool) -> bool:
        assert self._json is not None
        end, broken = self._json.end(), self._json.broken
        if end is None and not final and not broken:
            return False
        self._buffer = self._json.text()
        self._json = None
        if broken:  # a ``<`` or ``\\`` outside a string: not JSON
            return self._args_broken()
        return self._args_value(self._buffer[self._pos:end]) if end is not None else False

    def _args_value(self, text: str) -> bool:
        """A number, literal, object or array value, complete."""
        reader, call = self._arguments, self._call
        assert call is not None
        try:
            value = loads_json(text)
        except (ValueError, RecursionError):
            return self._args_broken()
        self._to_call(self._take(len(text)))
        if not reader.skipped:
            self._add_argument(reader.key, conform_json_arguments(call.name, {reader.key: value},
                                                                  self._schemas)[reader.key])
        reader.phase = Phase.AFTER
        return True

    def _args_broken(self) -> bool:
        """Not JSON after all: the call ends here, incomplete; what follows is content."""
        call = self._call
        assert call is not None
        self._emit(ToolCallEnd(call.index))
        self._call = None
        self._state = _State.TEXT
        return True

    def _step_body(self, final: bool) -> bool:
        self._to_call(self._take(skip_space(self._buffer, self._pos) - self._pos))
        if self._pos == len(self._buffer):
            return False
        for closer in self._format.closers:
            found = starts(self._buffer, self._pos, closer, final)
            if found is NEED:
                return False
            if found:
                self._to_call(self._take(len(closer)))
                between = closer in self._format.call_closers and closer not in self._format.wrapper_closers
                self._close_call(_State.BETWEEN if between else _State.TEXT)
                return True
        answer = self._ask(self._format.open_param, final) if self._buffer[self._pos] == "<" else None
        if answer is NEED:
            return False
        if isinstance(answer, ParamOpened):
            self._open_param(answer)
        else:
            stray = self._buffer.find("<", self._pos + 1)
            self._to_call(self._take((stray if stray > 0 else len(self._buffer)) - self._pos))
        return True

    def _step_value(self, final: bool) -> bool:
        assert self._param is not None
        close_tag = self._param.close_tag
        size, marker = scan(self._buffer, (close_tag, *self._param.ends_before), final, self._pos)
        self._value_text(self._take(size))
        if marker is None:
            return False
        if marker != close_tag:
            self._close_param()
            self._state = _State.BODY
            return True
        closes = self._closes_value(len(close_tag), final)
        if closes is NEED:
            return False
        if closes:
            self._to_call(self._take(len(close_tag)))
            self._close_param()
            self._state = _State.BODY
        else:
            self._value_text(self._take(len(close_tag)))
        return True

    def _closes_value(self, tag_size: int, final: bool) -> Any:
        """A value's closing tag ends it only when a parameter or the call's end follows."""
        after = skip_space(self._buffer, self._pos + tag_size, _CLOSE_LOOKAHEAD + 1)
        if after - self._pos - tag_size > _CLOSE_LOOKAHEAD or (after == len(self._buffer) and final):
            return True
        if after == len(self._buffer):
            return NEED
        answers = [starts(self._buffer, after, f, final) for f in self._format.followers]
        return True if True in answers else NEED if NEED in answers else False

    def _step_between(self, final: bool) -> bool:
        after = skip_space(self._buffer, self._pos, _WINDOW + 1)
        if after - self._pos > _WINDOW:  # not waited through: it is content
            self._state = _State.TEXT
            return True
        if after == len(self._buffer):
            if final:
                if self._format.wrapper_closers:  # whitespace inside an unclosed block belongs to it
                    self._calls[-1].raw_parts.append(self._take(after - self._pos))
                self._state = _State.TEXT
                return True
            return False
        tail_closers = (self._format.json_call_close,) if self._format.json_call_close else ()
        for closer in self._format.wrapper_closers + tail_closers:
            found = starts(self._buffer, after, closer, final)
            if found is NEED:
                return False
            if found:
                self._calls[-1].raw_parts.append(self._take(after - self._pos + len(closer)))
                if closer not in tail_closers:
                    self._state = _State.TEXT
                return True
        if self._calls[-1].wrapped:
            answer = self._ask(self._format.open_next_call, final, at=after - self._pos)
            if answer is NEED:
                return False
            if isinstance(answer, JsonOpened):
                self._open_json(answer, after - self._pos)
                return True
            if isinstance(answer, Opened):
                self._begin_call(answer, leading=self._take(after - self._pos))
                return True
        self._state = _State.TEXT
        return True

    # -- building calls -----------------------------------------------------------------------

    def _begin_call(self, opened: Opened, leading: str = "") -> None:
        call = _Call(len(self._calls), opened.name, opened.wrapped, opened.call_id)
        self._calls.append(call)
        self._call = call
        call.raw_parts.append(leading + self._take(opened.length))
        self._emit(ToolCallBegin(call.index, call.name, call.call_id))
        self._state = _State.BODY

    def _close_call(self, next_state: _State) -> None:
        call = self._call
        assert call is not None
        self._args("}" if call.emitted_keys else "{}")
        call.complete = True
        self._emit(ToolCallEnd(call.index))
        self._call = None
        self._state = next_state

    def _open_param(self, opened: ParamOpened) -> None:
        call = self._call
        assert call is not None
        self._to_call(self._take(opened.length))
        key = opened.key
        kind = opened.kind or (self._schemas.kind(call.name, key) if key is not None else None)
        choices = self._schemas.choices(call.name, key) if key is not None else None
        skipped = key is not None and key in call.emitted_keys
        streams = key is not None and not skipped and streams_as_text(kind, choices)
        self._param = _Param(key, kind, choices, opened.close_tag, opened.ends_before, skipped, streams)
        if streams:
            self._emit_key(key)  # type: ignore[arg-type]
            self._args('"')
        self._state = _State.VALUE

    def _value_text(self, text: str) -> None:
        param = self._param
        if not text or param is None:
            return
        self._to_call(text)
        if param.skipped:
            return
        if not param.streams:
            param.parts.append(text)
            return
        if self._format.framing:
            if not param.started and text.startswith("\n"):
                text = text[1:]
            if param.held_newline:
                text = "\n" + text
            param.held_newline = text.endswith("\n")
            if param.held_newline:
                text = text[:-1]
        param.started = True
        if text:
            param.parts.append(text)
            self._args(_escape(text))

    def _close_param(self) -> None:
        param, call = self._param, self._call
        assert param is not None and call is not None
        self._param = None
        text = "".join(param.parts)
        if param.skipped:
            return
        if param.streams:
            self._args('"')
            call.arguments[param.key] = text  # type: ignore[index]
        elif param.key is None:
            self._spread(text)
        else:
            self._add_argument(param.key, convert_value(text, param.kind, framing=self._format.framing,
                                                        choices=param.choices))

    def _spread(self, text: str) -> None:
        """A nameless parameter holding a JSON object: one argument per key."""
        call = self._call
        assert call is not None
        try:
            body = loads_json(text.strip())
        except (ValueError, RecursionError):
            return
        if isinstance(body, dict):
            for key, value in conform_json_arguments(call.name, body, self._schemas).items():
                if key not in call.emitted_keys:
                    self._add_argument(key, value)

    def _add_argument(self, key: str, value: Any) -> None:
        call = self._call
        assert call is not None
        self._emit_key(key)
        self._args(_dumps(value))
        call.arguments[key] = value

    def _emit_key(self, key: str) -> None:
        call = self._call
        assert call is not None
        self._args(("{" if not call.emitted_keys else ", ") + _dumps(key) + ": ")
        call.emitted_keys.add(key)

    # -- output -------------------------------------------------------------------------------

    def _to_content(self, text: str) -> None:
        if text:
            self._content.append(text)
            self._emit(ContentDelta(text))

    def _to_call(self, text: str) -> None:
        if text and self._call is not None:
            self._call.raw_parts.append(text)

    def _args(self, fragment: str) -> None:
        call = self._call
        assert call is not None
        call.json_parts.append(fragment)
        self._emit(ToolCallArgs(call.index, fragment))

    def _emit(self, event: Event) -> None:
        """Consecutive content, or arguments of one call, become one event: their pieces are
        collected here and joined once in ``_flush``, not re-concatenated at every piece."""
        last = self._events[-1] if self._events else None
        if isinstance(event, ContentDelta) and isinstance(last, ContentDelta):
            self._parts[-1].append(event.text)
        elif isinstance(event, ToolCallArgs) and isinstance(last, ToolCallArgs) \
                and last.index == event.index:
            self._parts[-1].append(event.fragment)
        else:
            self._events.append(event)
            self._parts.append([])

    def _flush(self) -> list[Event]:
        events = []
        for event, parts in zip(self._events, self._parts, strict=True):
            if isinstance(event, ContentDelta) and parts:
                event = ContentDelta(event.text + "".join(parts))
            elif isinstance(event, ToolCallArgs) and parts:
                event = ToolCallArgs(event.index, event.fragment + "".join(parts))
            events.append(event)
        self._events, self._parts = [], []
        return events


class ToolCallParser:
    """Parser for one request: the model's tool format and the request's ``tools``.

    >>> p = ToolCallParser("qwen3_coder", [{"type": "function", "function": {"name": "f",
    ...     "parameters": {"properties": {"x": {"type": "string"}}}}}])
    >>> p.parse("<tool_call>\\n<function=f>\\n<parameter=x>\\n123\\n</parameter>\\n</function>\\n</tool_call>"
    ...         ).tool_calls[0].arguments
    {'x': '123'}
    """

    def __init__(self, tool_format: str, tools: list[Any] | None = None) -> None:
        self.format = get_format(tool_format)
        self._schemas = ToolSchemas(tools)

    @property
    def call_start(self) -> str:
        """The tag that opens a block of calls; inside reasoning it ends the reasoning."""
        return self.format.wrapper_open

    def stream(self) -> ToolCallStream:
        return ToolCallStream(self.format, self._schemas)

    def parse(self, text: str) -> ParseResult:
        stream = self.stream()
        stream.feed(text)
        stream.close()
        return stream.result
