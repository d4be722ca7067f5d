"""GLM-4.5 / 4.6 (newline-separated) and GLM-4.7 (no whitespace) calls.

::

    <tool_call>write_file
    <arg_key>path</arg_key>
    <arg_value>a.py</arg_value>
    </tool_call>

    <tool_call>write_file<arg_key>path</arg_key><arg_value>a.py</arg_value></tool_call>

One parser reads both spellings. The name runs to the first newline or tag; one call per block.
Values are raw text with no framing newlines.
"""

from __future__ import annotations

from ..scanner import HEADER_LIMIT, NEED, skip_space, starts, unquote, valid_name
from ..schema import ToolSchemas
from .base import Answer, CallFormat, CallSyntax, Opened, ParamOpened

_KEY, _VALUE = "<arg_key>", "<arg_value>"


class Glm45(CallFormat):
    names: tuple[str, ...] = ("glm4_5", "glm4_6", "laguna", "poolside_v1")
    wrapper_open = "<tool_call>"
    wrapper_close = "</tool_call>"
    call_close = "</tool_call>"
    start_markers = ("<tool_call>",)
    param_prefixes = (_KEY, _VALUE)
    syntax = CallSyntax(
        trigger="<tool_call>", block_close="</tool_call>", call_open=("{name}\n", "{name}"), quotes=("", '"'),
        param_open=("<arg_key>{key}</arg_key>\n<arg_value>", "<arg_key>{key}</arg_key><arg_value>"),
        value_close="</arg_value>", after_param=("\n", ""), json_param_open=(_VALUE,))

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        opened = starts(text, 0, self.wrapper_open, final)
        if opened is not True:
            return opened or None
        start = skip_space(text, len(self.wrapper_open))
        ends = [at for at in (text.find("\n", start), text.find("<", start)) if at >= 0]
        if not ends:
            return NEED if not final and len(text) - start < HEADER_LIMIT else None
        end = min(ends)
        name = unquote(text[start:end])
        if not valid_name(name):
            return None
        if text[end] == "<":  # a tag right after the name must be the call's own
            found = [starts(text, end, tag, final) for tag in (_KEY, self.call_close)]
            if True not in found:
                return NEED if NEED in found else None
        return Opened(name, end, wrapped=True)

    def open_param(self, text: str, final: bool) -> Answer:
        return key_value_param(text, final, "", self.call_close)

    def detect(self, chat_template: str) -> bool:
        return "<arg_key>" in chat_template and "<tool_sep>" not in chat_template \
            and not _glm47(chat_template)


class Glm47(Glm45):
    names = ("glm4_7",)

    def detect(self, chat_template: str) -> bool:
        return "<arg_key>" in chat_template and _glm47(chat_template)


def _glm47(chat_template: str) -> bool:
    """GLM-4.7 teaches calls with no newline between the name and the first key."""
    return "{function-name}<arg_key>" in chat_template


def key_value_param(text: str, final: bool, suffix: str, call_close: str) -> Answer:
    """``<arg_key>K</arg_key>`` then (whitespace allowed) ``<arg_value>``, or a nameless
    ``<arg_value>`` holding all arguments as one JSON object; tags may carry a token suffix (Hy3)."""
    key_open, key_close = f"<arg_key{suffix}>", f"</arg_key{suffix}>"
    value_open, value_close = f"<arg_value{suffix}>", f"</arg_value{suffix}>"
    nameless = starts(text, 0, value_open, final)
    if nameless is not False:
        return ParamOpened(None, len(value_open), value_close, ends_before=(call_close,)) \
            if nameless is True else NEED
    opened = starts(text, 0, key_open, final)
    if opened is not True:
        return opened or None
    close = text.find(key_close, len(key_open), len(key_open) + HEADER_LIMIT)
    if close < 0:
        return NEED if not final and len(text) < HEADER_LIMIT else None
    value = skip_space(text, close + len(key_close))
    found = starts(text, value, value_open, final) if value < len(text) else (None if final else NEED)
    if found is not True:
        return found or None
    key = unquote(text[len(key_open):close])
    return ParamOpened(key or None, value + len(value_open), value_close)
