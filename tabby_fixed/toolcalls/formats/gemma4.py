"""Gemma 4 calls: a JSON-like object with bare keys and ``<|"|>``-quoted strings.

::

    <|tool_call>call:write_file{path:<|"|>a.py<|"|>,append:true,tags:[<|"|>x<|"|>],opts:{deep:1}}<tool_call|>

``<|"|>`` is one token that opens and closes a string; the text between is the string exactly
(quotes, braces and backslashes included, nothing escaped). Other values are JSON scalars,
lists and objects in the same syntax. The body is held until ``<tool_call|>`` and read by this
module; parallel calls are consecutive blocks. Reasoning is ``<|channel>thought``...``<channel|>``.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from typing import Any

from ..schema import JSON_DECODER, ToolSchemas, conform_json_arguments, loads_json
from .base import Answer, CallFormat, Decoded, JsonOpened, between_tags, json_arguments

_QUOTE = '<|"|>'
_OPEN, _CLOSE = "<|tool_call>", "<tool_call|>"


class _Cut(Exception):
    """The text ended inside a value."""


class _Reader:
    """Reads Gemma 4's object syntax; ``members`` holds the top-level members read so far."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.members: dict[str, Any] = {}

    def top(self) -> dict[str, Any]:
        self._space()
        if not self.text.startswith("{", self.at):
            raise ValueError("not an object")
        value = self._object(self.members)
        if self.text[self.at:].strip():
            raise ValueError("text after the object")
        return value

    def _space(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def _value(self) -> Any:
        self._space()
        text = self.text
        if self.at == len(text):
            raise _Cut
        if text.startswith(_QUOTE, self.at):
            end = text.find(_QUOTE, self.at + len(_QUOTE))
            if end < 0:
                raise _Cut
            value, self.at = text[self.at + len(_QUOTE):end], end + len(_QUOTE)
            return value
        if text[self.at] == "{":
            return self._object({})
        if text[self.at] == "[":
            return self._array()
        if text[self.at] == '"':
            try:
                value, self.at = JSON_DECODER.raw_decode(text, self.at)
            except ValueError:
                raise _Cut from None
            return value
        end = self._scalar_end()
        word = text[self.at:end].strip()
        self.at = end
        try:
            return loads_json(word)
        except ValueError:
            return word

    def _scalar_end(self) -> int:
        for at in range(self.at, len(self.text)):
            if self.text[at] in ",}]":
                return at
        raise _Cut

    def _object(self, members: dict[str, Any]) -> dict[str, Any]:
        self.at += 1
        while True:
            self._space()
            if self.text.startswith("}", self.at):
                self.at += 1
                return members
            colon = self.text.find(":", self.at)
            if colon < 0:
                raise _Cut
            key = self.text[self.at:colon].strip().removeprefix(_QUOTE).removesuffix(_QUOTE).strip('"')
            if not key or any(c in key for c in "{}[],"):
                raise ValueError(f"not a key: {key!r}")
            self.at = colon + 1
            value = self._value()
            members[key] = value
            self._separator("}")

    def _array(self) -> list[Any]:
        self.at += 1
        items: list[Any] = []
        while True:
            self._space()
            if self.text.startswith("]", self.at):
                self.at += 1
                return items
            items.append(self._value())
            self._separator("]")

    def _separator(self, closer: str) -> None:
        self._space()
        if self.at == len(self.text):
            raise _Cut
        if self.text[self.at] == ",":
            self.at += 1
        elif self.text[self.at] != closer:
            raise ValueError(f"expected , or {closer}")


class Gemma4(CallFormat):
    names = ("gemma4",)
    wrapper_open = _OPEN
    json_call_close = _CLOSE
    start_markers = (_OPEN,)
    reasoning_tags = (("<|channel>thought", "<channel|>"),)

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        header = between_tags(text, 0, _OPEN, "{", final)
        if not isinstance(header, tuple):
            return header
        name = header[0].removeprefix("call:").strip() if header[0].startswith("call:") else ""
        opened = json_arguments(text, header[1] - 1, final, name)
        return replace(opened, until=_CLOSE) if isinstance(opened, JsonOpened) else opened

    def decode_body(self, text: str) -> Any:
        try:
            return _Reader(text).top()
        except _Cut:
            raise ValueError("the object is not complete") from None

    def call_from_partial_json(self, text: str, opened: JsonOpened,
                               schemas: ToolSchemas) -> tuple[list[Decoded], Decoded | None]:
        reader = _Reader(text)
        with suppress(_Cut, ValueError, RecursionError):  # the members read before the cut are what finished
            reader.top()
        name = opened.name or ""
        return [], Decoded(name, conform_json_arguments(name, reader.members, schemas))

    def detect(self, chat_template: str) -> bool:
        return _OPEN in chat_template and _CLOSE in chat_template
