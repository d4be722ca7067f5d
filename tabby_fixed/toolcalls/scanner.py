"""Incremental tag scanning shared by every format.

Streaming text arrives in arbitrary pieces, so a tag can be split anywhere (``<tool_c`` +
``all>``). The scanner releases text as soon as it cannot be the start of a tag it is looking for
and holds back only the longest suffix that could still grow into one: at most the length of the
longest marker minus one. Headers such as ``<function=NAME>`` are read from a bounded window
(``HEADER_LIMIT``), so undecided text never grows without bound and no delta makes the parser
rescan what it already decided.

Matchers answer with a result, ``NEED`` (undecidable yet; only when not at the end of input) or
None (definitely not this tag).
"""

from __future__ import annotations

import functools
import re
from typing import Final


class _Need:
    """More text is needed before the question can be answered."""

    _instance: _Need | None = None

    def __new__(cls) -> _Need:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NEED"


NEED: Final = _Need()

#: Longest tag header (``<function=...>``, ``<parameter name="...">``) waited for before giving up.
HEADER_LIMIT: Final = 512

_NAME_ATTRIBUTE = re.compile(r"\s+name\s*=\s*(.*)\Z", re.S)
_NOT_IN_NAMES = re.compile(r"[\s<>{}\[\]()]")


def partial_suffix(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of text that is a proper prefix of one of the markers.

    Only sizes whose last marker character is text's last character are compared, so a long
    marker (a stop string) costs little on text that does not end like it.
    """
    longest = 0
    if not text:
        return 0
    last = text[-1]
    for marker in markers:
        at = marker.rfind(last, 0, min(len(marker) - 1, len(text)))
        while at >= longest:  # a prefix of at + 1 characters ends with last
            if text.endswith(marker[:at + 1]):
                longest = at + 1
                break
            at = marker.rfind(last, 0, at)
    return longest


def scan(text: str, markers: tuple[str, ...], final: bool, start: int = 0) -> tuple[int, str | None]:
    """Where the first marker starts, or how much text is safe to release, from ``start`` on.

    Returns ``(n, marker)``: ``text[start:start + n]`` holds no marker and cannot begin one; when
    marker is not None it starts at ``start + n``. One pass finds the earliest of all markers, so
    a marker that is far away (or absent) is not searched for again at every step.
    """
    found = _alternation(markers).search(text, start) if markers else None
    if found is not None:
        return found.start() - start, found.group()
    rest = len(text) - start
    if final or not markers:
        return rest, None
    return rest - partial_suffix(text[max(start, len(text) - _longest(markers)):], markers), None


@functools.lru_cache(maxsize=64)
def _alternation(markers: tuple[str, ...]) -> re.Pattern[str]:
    """The markers as one pattern; at one position the earlier marker in the tuple wins."""
    return re.compile("|".join(re.escape(marker) for marker in markers))


@functools.lru_cache(maxsize=64)
def _longest(markers: tuple[str, ...]) -> int:
    return max(len(marker) for marker in markers)


def starts(text: str, start: int, marker: str, final: bool) -> bool | _Need:
    """Whether text continues with marker at start; NEED while it is still a prefix of it."""
    piece = text[start:start + len(marker)]
    if piece == marker:
        return True
    return NEED if not final and marker.startswith(piece) and len(piece) < len(marker) else False


def skip_space(text: str, start: int, limit: int | None = None) -> int:
    """Index of the first non-space at or after start, looking at most ``limit`` characters."""
    end = len(text) if limit is None else min(len(text), start + limit)
    while start < end and text[start].isspace():
        start += 1
    return start


def read_header(text: str, start: int, prefix: str, final: bool) -> tuple[str, int] | _Need | None:
    """Read ``prefix ATTRS>`` at start: ``(ATTRS, index after '>')``."""
    opened = starts(text, start, prefix, final)
    if opened is not True:
        return opened or None
    body = start + len(prefix)
    close = text.find(">", body, body + HEADER_LIMIT)
    region = text[body:close if close >= 0 else body + HEADER_LIMIT]
    if "<" in region or "\n" in region.strip():
        return None
    if close < 0:
        return NEED if not final and len(text) - body < HEADER_LIMIT else None
    return region, close + 1


def unquote(raw: str) -> str:
    """Trim whitespace, then one pair of surrounding quotes when that quote does not occur inside."""
    name = raw.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'" and name[0] not in name[1:-1]:
        return name[1:-1]
    return name


def attribute_name(attributes: str) -> str | None:
    """The name in ``=K``, ``="K"``, ``='K'``, `` name="K"``, `` name='K'`` or `` name=K``.

    Returns ``""`` for a tag with no usable name (``<parameter>``, ``<parameter name>``) and None
    when the text is not this tag at all (``<parameters>``).
    """
    if attributes.startswith("="):
        return unquote(attributes[1:])
    named = _NAME_ATTRIBUTE.match(attributes)
    if named:
        value = named.group(1).strip()
        if value[:1] in ("'", '"') and value[0] in value[1:]:
            return value[1:value.index(value[0], 1)].strip()
        return unquote(value)
    return "" if attributes == "" or attributes[0].isspace() else None


def valid_name(name: str) -> bool:
    """Whether a tool name read from a tag could be a name at all (not prose, not JSON)."""
    return bool(name) and not _NOT_IN_NAMES.search(name)
