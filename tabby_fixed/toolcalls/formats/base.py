"""What a format tells the parser: where calls start, how headers and parameters are written.

Formats are small and declarative; the one state machine that drives them lives in
``toolcalls/parser.py``. A format answers questions about a bounded piece of text at the front
of the parser's buffer, with a result, ``NEED`` (only before the end of input) or None (no).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..scanner import HEADER_LIMIT, NEED, Need, attribute_name, read_header, skip_space, starts, unquote, valid_name
from ..schema import Kind, ToolSchemas, conform_json_arguments, loads_json


@dataclass(frozen=True)
class Opened:
    """A call's header is complete: the call begins here."""

    name: str
    length: int  # characters of the buffer the header used
    wrapped: bool  # inside the format's wrapper (False: a bare call)
    call_id: str | None = None  # the id the model wrote, when the format has one


@dataclass(frozen=True)
class JsonOpened:
    """A JSON-bodied call may start here; its JSON value begins at ``length``.

    When the header already named the call (Kimi, Mistral, gpt-oss), ``name`` holds it, the call
    begins at once and its arguments object streams as it arrives; otherwise the call is held
    until its value is complete, and the value names it (Hermes).
    """

    length: int
    name: str | None = None
    call_id: str | None = None
    #: The body ends where this tag starts rather than where its JSON closes (Gemma 4's bodies are
    #: not JSON); ``decode_body`` reads it.
    until: str = ""


@dataclass(frozen=True)
class Decoded:
    """A call read from JSON: its name, arguments and the model's id for it, if any."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None


@dataclass(frozen=True)
class ParamOpened:
    """A parameter's opening tag is complete; its value follows."""

    key: str | None  # None: a nameless parameter whose JSON object spreads into arguments
    length: int
    close_tag: str
    #: Tags that also end the value and are left for the call: an unclosed ``<arg_value>{json}``
    #: still ends at ``</function>``.
    ends_before: tuple[str, ...] = ()
    #: The kind the tag itself states, over the schema's (DSML's ``string="true"``).
    kind: Kind = None


@dataclass(frozen=True)
class CallSyntax:
    """How a format's template writes calls, for the grammar that makes a model write them
    (``sampling/tool_grammar.py``). Declared next to the parser's questions so that a new format
    states both in one place. ``{name}`` and ``{key}`` stand for the tool and parameter names,
    each written bare or inside any of ``quotes``; ``{index}`` stands for a call number, ``{string}``
    in a parameter's opening tag for ``true`` (a string value, free text) or ``false`` (JSON);
    tuples list the spellings accepted.
    """

    trigger: str  # the tag that starts a block of calls (the lazy grammar's trigger)
    block_close: str
    open_gap: str = ""  # written right after the trigger
    block_separator: str = "\n"  # between two blocks
    shares_block: bool = False  # several calls inside one block (MiniMax-M2), else one call per block
    call_separator: str = "\n"  # between two calls in one block
    call_open: tuple[str, ...] = ()
    call_close: str = ""
    quotes: tuple[str, ...] = ("",)
    param_open: tuple[str, ...] = ()
    value_close: str = ""  # ends a parameter's value (string values are free text up to it)
    after_param: tuple[str, ...] = ("",)
    json_param_open: tuple[str, ...] = ()  # a nameless parameter holding all arguments as one JSON object
    json_call: bool = False  # the call is one JSON object {"name": ..., "arguments": {...}} (Hermes)
    #: The header (``call_open``, which may hold ``{index}``: a call number) is followed by the
    #: arguments as one JSON object, then ``call_close`` (Kimi-K2, DeepSeek-V3.1, Mistral).
    json_arguments: bool = False


#: What a format answers, depending on the question: the call or parameter that opens here,
#: ``NEED`` (undecidable until more text comes), or None (nothing opens here).
Answer = Opened | JsonOpened | ParamOpened | Need | None

Route = Literal["reasoning", "content", "tool"]


class MessageChannels:
    """An answer made of messages, ``HEADER<|message|>BODY`` then an end token, whose header says
    where the body goes (gpt-oss's harmony, Muse Glimmer). The prompt ends with
    ``<|start|>assistant``, so generation starts inside the first message's header.

    ``reasoning.ChannelSplitter`` routes the bodies; a tool message is handed on to the tool-call
    parser as ``<|start|>HEADER<|message|>BODY`` plus ``tool_end`` when the format's calls are
    named in the header, or as its body alone when ``tool_end`` is empty.
    """

    message = "<|message|>"
    start = "<|start|>"
    ends: tuple[str, ...] = ()
    tool_end = ""

    def route(self, header: str) -> Route:
        raise NotImplementedError


class CallFormat:
    """Base for every format. Subclasses set the class attributes and answer the questions."""

    #: Registry name, then TabbyAPI's aliases for it.
    names: tuple[str, ...] = ()
    #: Tag that opens a block of calls, and the tag that closes it.
    wrapper_open = ""
    wrapper_close = ""
    #: Tag that closes one call (equal to wrapper_close when a block holds one call).
    call_close = ""
    #: Text at which the parser stops to ask open_call (wrapper_open, plus any bare form).
    start_markers: tuple[str, ...] = ()
    #: Starts of parameter tags: after a value's closing tag one of these, or a closing tag,
    #: must follow, otherwise the closing tag was part of the value.
    param_prefixes: tuple[str, ...] = ()
    #: The template writes a newline after a parameter's opening tag and before its closing tag.
    framing = False
    #: Tag that ends a JSON-bodied call after its JSON (Kimi's ``<|tool_call_end|>``); it belongs to the call.
    json_call_close = ""
    #: For formats whose whole answer is channelled messages: how to route them.
    channels: MessageChannels | None = None
    #: Reasoning tags of the family, when they are not ``<think>``/``</think>``: candidate pairs,
    #: the first whose opening tag the chat template mentions wins (the first pair otherwise).
    reasoning_tags: tuple[tuple[str, str], ...] = ()
    #: How calls are written, for the grammar that enforces ``tool_choice`` (None: not enforceable).
    syntax: CallSyntax | None = None

    def call_syntax(self) -> CallSyntax | None:
        """The format's call syntax when it is its own: one whose trigger is not among the format's
        start markers was inherited from a format that starts calls elsewhere, and would steer the
        model to another format's calls (such a subclass declares its own, or none)."""
        return self.syntax if self.syntax is not None and self.syntax.trigger in self.start_markers else None

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        """At a start marker: Opened, JsonOpened, NEED or None."""
        raise NotImplementedError

    def open_next_call(self, text: str, final: bool) -> Answer:
        """Inside a wrapper after a call closed (text starts at non-space): Opened, JsonOpened,
        NEED or None."""
        return None

    def open_param(self, text: str, final: bool) -> Answer:
        """Inside a call, at ``<``: ParamOpened, NEED or None."""
        return None

    def decode_body(self, text: str) -> Any:
        """A complete JSON-bodied call's value; ValueError when it is not one."""
        return loads_json(text)

    def call_from_json(self, body: Any, opened: JsonOpened, schemas: ToolSchemas) -> list[Decoded] | None:
        """For JSON-bodied formats: the calls in a complete JSON value, or None when it holds none.

        By default the header named the call and the value is its arguments object."""
        if opened.name is None or not isinstance(body, dict):
            return None
        return [Decoded(opened.name, conform_json_arguments(opened.name, body, schemas), opened.call_id)]

    def call_from_partial_json(self, text: str, opened: JsonOpened,
                               schemas: ToolSchemas) -> tuple[list[Decoded], Decoded | None]:
        """JSON cut off by the end of generation (text from where it starts): the calls in it that
        finished, and the call that was cut (with the arguments that finished), when its name is
        known. (Arguments of calls named in their header stream instead and need none of this.)"""
        return [], None

    def detect(self, chat_template: str) -> bool:
        """Whether a chat template teaches this format."""
        return False

    def new_call_id(self) -> str | None:
        """An id for a call the model gave none, when the family's templates need a particular
        shape; None lets the server make its own."""
        return None

    @property
    def call_closers(self) -> tuple[str, ...]:
        return (self.call_close,) if self.call_close else ()

    @property
    def wrapper_closers(self) -> tuple[str, ...]:
        return (self.wrapper_close,) if self.wrapper_close else ()

    @property
    def closers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.call_closers + self.wrapper_closers))

    @property
    def followers(self) -> tuple[str, ...]:
        return self.param_prefixes + self.closers


def between_tags(text: str, start: int, open_tag: str, close_tag: str, final: bool) -> tuple[str, int] | Need | None:
    """``OPEN_TAG text CLOSE_TAG`` at start: ``(the text between, stripped; index after CLOSE_TAG)``."""
    opened = starts(text, start, open_tag, final)
    if opened is not True:
        return opened or None
    body = start + len(open_tag)
    close = text.find(close_tag, body, body + HEADER_LIMIT + len(close_tag))
    if close < 0:
        return NEED if not final and len(text) - body < HEADER_LIMIT + len(close_tag) else None
    return text[body:close].strip(), close + len(close_tag)


def json_arguments(text: str, at: int, final: bool, name: str, call_id: str | None = None) -> Answer:
    """The arguments object of a call its header named, starting at ``at`` after any whitespace.
    At the end of input the call is cut (its arguments are empty)."""
    if not valid_name(name):
        return None
    at = skip_space(text, at)
    if at == len(text):
        return JsonOpened(at, name, call_id) if final else NEED
    return JsonOpened(at, name, call_id) if text[at] == "{" else None


class SectionOfCalls(CallFormat):
    """A wrapper holding calls that each open with ``CALL_OPEN header HEADER_CLOSE`` (Kimi,
    DeepSeek V3.1, Hy3); ``opened`` says what follows the header."""

    call_open = ""
    header_close = ""

    def opened(self, text: str, header: str, end: int, final: bool) -> Answer:
        raise NotImplementedError

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        start = after_wrapper(text, self.wrapper_open, final)
        return self._call(text, start, final) if isinstance(start, int) else start

    def open_next_call(self, text: str, final: bool) -> Answer:
        return self._call(text, 0, final)

    def _call(self, text: str, start: int, final: bool) -> Answer:
        header = between_tags(text, start, self.call_open, self.header_close, final)
        return self.opened(text, *header, final) if isinstance(header, tuple) else header


class SectionOfJsonCalls(SectionOfCalls):
    """Calls whose header names the tool, then a JSON arguments object."""

    def named(self, header: str) -> tuple[str, str | None]:
        """The tool's name and the model's id for the call, from the header."""
        return unquote(header), None

    def opened(self, text: str, header: str, end: int, final: bool) -> Answer:
        return json_arguments(text, end, final, *self.named(header))


def after_wrapper(text: str, wrapper: str, final: bool) -> int | Need | None:
    """Where the text after ``WRAPPER`` and any whitespace starts (an int), NEED or None."""
    opened = starts(text, 0, wrapper, final)
    if opened is not True:
        return opened or None
    start = skip_space(text, len(wrapper))
    if start == len(text):
        return None if final else NEED
    return start


def header_call(text: str, start: int, prefix: str, final: bool, wrapped: bool) -> Answer:
    """A ``<function=NAME>`` or ``<invoke name="NAME">`` header at start."""
    header = read_header(text, start, prefix, final)
    if not isinstance(header, tuple):
        return header
    attributes, end = header
    name = unquote(attributes) if prefix.endswith("=") else attribute_name(attributes)
    return Opened(name, end, wrapped) if name and valid_name(name) else None


def wrapped_header_call(text: str, final: bool, wrapper: str, prefix: str) -> Answer:
    """``WRAPPER`` then (whitespace allowed) a call header."""
    start = after_wrapper(text, wrapper, final)
    return header_call(text, start, prefix, final, wrapped=True) if isinstance(start, int) else start


def parameter_tag(text: str, final: bool, call_close: str, json_value_tag: str | None = None,
                  prefix: str = "<parameter") -> Answer:
    """``<parameter=K>`` in any accepted spelling (or another ``prefix``: ``<atem:parameter``), a
    nameless ``<parameter>``, or a nameless ``json_value_tag`` (``<arg_value>``) holding all
    arguments as one JSON object."""
    if json_value_tag is not None:
        opened = starts(text, 0, json_value_tag, final)
        if opened is True:
            return ParamOpened(None, len(json_value_tag), json_value_tag.replace("<", "</"),
                               ends_before=(call_close,))
        if opened is NEED:
            return NEED
    header = read_header(text, 0, prefix, final)
    if not isinstance(header, tuple):
        return header
    attributes, end = header
    key = attribute_name(attributes)
    if key is None:
        return None
    return ParamOpened(key or None, end, prefix.replace("<", "</") + ">")


class InvokeCalls(CallFormat):
    """Calls inside a wrapper tag, each opened by an invoke tag with a name attribute
    (``<invoke name="NAME">``): MiniMax-M2, DeepSeek's DSML, Muse Glimmer."""

    invoke_tag: str  # the invoke tag's opening text, up to its attributes

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        return wrapped_header_call(text, final, self.wrapper_open, self.invoke_tag)

    def open_next_call(self, text: str, final: bool) -> Answer:
        return header_call(text, 0, self.invoke_tag, final, wrapped=True)
