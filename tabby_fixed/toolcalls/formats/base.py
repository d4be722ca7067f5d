"""What a format tells the parser: where calls start, how headers and parameters are written.

Formats are small and declarative; the one state machine that drives them lives in
``toolcalls/parser.py``. A format answers questions about a bounded piece of text at the front
of the parser's buffer, with a result, ``NEED`` (only before the end of input) or None (no).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..scanner import NEED, attribute_name, read_header, skip_space, starts, unquote, valid_name
from ..schema import ToolSchemas


@dataclass(frozen=True)
class Opened:
    """A call's header is complete: the call begins here."""

    name: str
    length: int  # characters of the buffer the header used
    wrapped: bool  # inside the format's wrapper (False: a bare call)


@dataclass(frozen=True)
class JsonOpened:
    """A JSON-bodied call may start here; its object begins at ``length``."""

    length: int


@dataclass(frozen=True)
class ParamOpened:
    """A parameter's opening tag is complete; its value follows."""

    key: str | None  # None: a nameless parameter whose JSON object spreads into arguments
    length: int
    close_tag: str
    #: Tags that also end the value and are left for the call: an unclosed ``<arg_value>{json}``
    #: still ends at ``</function>``.
    ends_before: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallSyntax:
    """How a format's template writes calls, for the grammar that makes a model write them
    (``sampling/tool_grammar.py``). Declared next to the parser's questions so that a new format
    states both in one place. ``{name}`` and ``{key}`` stand for the tool and parameter names,
    each written bare or inside any of ``quotes``; ``{index}`` stands for a call number; tuples list
    the spellings accepted.
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


#: Opened | JsonOpened | ParamOpened | NEED | None, depending on the question.
Answer = Any


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
        """Inside a wrapper after a call closed (text starts at non-space): Opened, NEED or None."""
        return None

    def open_param(self, text: str, final: bool) -> Answer:
        """Inside a call, at ``<``: ParamOpened, NEED or None."""
        return None

    def call_from_json(self, body: Any, schemas: ToolSchemas) -> tuple[str, dict[str, Any]] | None:
        """For JSON-bodied formats: the name and arguments in a complete JSON value, or None."""
        return None

    def detect(self, chat_template: str) -> bool:
        """Whether a chat template teaches this format."""
        return False

    @property
    def closers(self) -> tuple[str, ...]:
        return (self.call_close,) if self.call_close == self.wrapper_close else (
            self.call_close, self.wrapper_close)

    @property
    def followers(self) -> tuple[str, ...]:
        return self.param_prefixes + self.closers


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
    opened = starts(text, 0, wrapper, final)
    if opened is not True:
        return opened or None
    start = skip_space(text, len(wrapper))
    if start == len(text):
        return None if final else NEED
    return header_call(text, start, prefix, final, wrapped=True)


def parameter_tag(text: str, final: bool, call_close: str, json_value_tag: str | None = None) -> Answer:
    """``<parameter=K>`` in any accepted spelling, a nameless ``<parameter>``, or a nameless
    ``json_value_tag`` (``<arg_value>``) holding all arguments as one JSON object."""
    if json_value_tag is not None:
        opened = starts(text, 0, json_value_tag, final)
        if opened is True:
            return ParamOpened(None, len(json_value_tag), json_value_tag.replace("<", "</"),
                               ends_before=(call_close,))
        if opened is NEED:
            return NEED
    header = read_header(text, 0, "<parameter", final)
    if not isinstance(header, tuple):
        return header
    attributes, end = header
    key = attribute_name(attributes)
    if key is None:
        return None
    return ParamOpened(key or None, end, "</parameter>")
