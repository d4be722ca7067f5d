"""Pieces of text the parser reads as they arrive: a body that ends at a tag, and where the
reader of a streamed JSON arguments object is (its phase, the JSON escapes it must hold back).

Each piece of text is looked at once, so reading stays linear in the length of the call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum, auto


class Phase(Enum):
    """Where the reader of a streamed JSON arguments object is."""

    OPEN = auto()  # before its ``{``
    KEY = auto()  # before a member's key (or the ``}`` of an empty object)
    COLON = auto()
    VALUE = auto()
    STRING = auto()  # inside a string value: it streams
    NESTED = auto()  # inside an object or array value (the parser's ``_JsonEnd`` finds its end)
    SCALAR = auto()  # inside a number or literal
    AFTER = auto()  # after a value: ``,`` or ``}``


@dataclass
class JsonArguments:
    phase: Phase = Phase.OPEN
    key: str = ""
    first: bool = True  # no member yet: ``}`` may close the object
    skipped: bool = False  # a repeated key: the first one counts
    parts: list[str] = field(default_factory=list)


#: What ends a plain run of a JSON string, and a number or literal.
STRING_STOP = re.compile(r'["\\]')
SCALAR_END = re.compile(r"[\s,}\]]")
#: The longest JSON escape (a surrogate pair, ``\\uD83D\\uDE00``): all ``escape_size`` looks at.
ESCAPE_LIMIT = 12


def escape_size(text: str) -> int | None:
    """Characters of the JSON escape at the start of text (a surrogate pair is one); None while
    more text could change the answer."""
    if len(text) < 2:
        return None
    if text[1] != "u":
        return 2
    if len(text) < 6:
        return None
    try:
        high = 0xD800 <= int(text[2:6], 16) <= 0xDBFF
    except ValueError:
        return 6
    if not high:
        return 6
    if len(text) < 8:
        return None
    if text[6:8] != "\\u":
        return 6
    return 12 if len(text) >= 12 else None


class TagEnd:
    """A call body that ends at a tag (``JsonOpened.until``), with the parser's ``_JsonEnd`` interface: the
    text grows as pieces, each searched once together with the few characters before it that
    could begin the tag."""

    #: Unlike a JSON object, the body can hold any text: only the tag (or the end of input) ends it.
    broken = False

    def __init__(self, text: str, start: int, tag: str) -> None:
        self.start = start
        self._tag = tag
        self._pieces = [text]
        self._unsearched = [text[start:]]
        self._searched = start  # characters of the whole text searched so far
        self._tail = ""  # the end of the searched text, which may begin the tag
        self._end: int | None = None

    def add(self, delta: str) -> None:
        self._pieces.append(delta)
        if self._end is None:
            self._unsearched.append(delta)

    def text(self) -> str:
        joined = "".join(self._pieces)
        self._pieces = [joined]
        return joined

    def end(self) -> int | None:
        """Index where the tag starts, once it has arrived."""
        for piece in self._unsearched:
            if self._end is not None:
                break
            window = self._tail + piece
            at = window.find(self._tag)
            if at >= 0:
                self._end = self._searched - len(self._tail) + at
            self._searched += len(piece)
            self._tail = window[-(len(self._tag) - 1):] if len(self._tag) > 1 else ""
        self._unsearched = []
        return self._end
