"""A JSON object cut off by the end of generation: the members that finished.

A call whose JSON body was cut still names its tool and may carry finished arguments; those are
worth returning (as a ``complete=False`` call) rather than dumping the whole call into content.
A string, object, array or literal is finished at its last character; a number only once the
``,`` or ``}`` after it has arrived, so ``12`` cut from ``123`` is never taken for the whole.
"""

from __future__ import annotations

from typing import Any

from .scanner import skip_space
from .schema import JSON_DECODER as _DECODER


def finished_members(text: str, start: int = 0) -> tuple[dict[str, Any], tuple[str, int] | None]:
    """The members of the object opening at ``text[start]`` that finished, and the key and start
    of the value that was cut off (None when the cut fell elsewhere or the object is whole)."""
    members: dict[str, Any] = {}
    at = skip_space(text, start)
    if not text.startswith("{", at):
        return members, None
    at += 1
    while True:
        at = skip_space(text, at)
        if not text.startswith('"', at):
            return members, None
        try:
            key, at = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            return members, None
        at = skip_space(text, at)
        if not text.startswith(":", at):
            return members, None
        value_start = skip_space(text, at + 1)
        try:
            value, at = _DECODER.raw_decode(text, value_start)
        except (ValueError, RecursionError):
            return members, (key, value_start) if value_start < len(text) else None
        at = skip_space(text, at)
        if at == len(text) and isinstance(value, (int, float)) and not isinstance(value, bool):
            return members, (key, value_start)  # the number may go on
        if at == len(text):
            members[key] = value
            return members, None
        if text[at] not in ",}":
            return members, None
        members[key] = value  # as json.loads: the last one wins
        if text[at] == "}":
            return members, None
        at += 1


def finished_items(text: str, start: int = 0) -> tuple[list[Any], int | None]:
    """The items of the array opening at ``text[start]`` that finished, and where the item that
    was cut off starts (None when the cut fell elsewhere or the array is whole)."""
    items: list[Any] = []
    at = skip_space(text, start)
    if not text.startswith("[", at):
        return items, None
    at += 1
    while True:
        item_start = skip_space(text, at)
        if item_start == len(text):
            return items, None
        try:
            item, at = _DECODER.raw_decode(text, item_start)
        except (ValueError, RecursionError):
            return items, item_start
        at = skip_space(text, at)
        if at == len(text) or text[at] not in ",]":
            return items, item_start if at == len(text) else None
        items.append(item)
        if text[at] == "]":
            return items, None
        at += 1
