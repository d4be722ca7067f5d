"""The registry: one entry per format, TabbyAPI's ``tool_format`` aliases as extra keys."""

from __future__ import annotations

from types import MappingProxyType

from .base import CallFormat
from .glm4_5 import Glm45, Glm47
from .hermes import Hermes
from .minimax_m2 import MiniMaxM2
from .qwen3_coder import Qwen3Coder


class UnknownFormatError(ValueError):
    """A tool format name that is not registered; the message lists the known ones."""


#: Most specific first: detection asks them in this order.
_FORMATS: tuple[CallFormat, ...] = (MiniMaxM2(), Glm47(), Glm45(), Qwen3Coder(), Hermes())

#: Every accepted name (canonical names and aliases) to its format.
FORMATS = MappingProxyType({name: fmt for fmt in _FORMATS for name in fmt.names})


def get_format(name: str) -> CallFormat:
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise UnknownFormatError(f"unknown tool format {name!r}; known formats: {known}") from None


def detect_format(chat_template: str | None) -> str | None:
    """The canonical name of the format a chat template teaches, or None if it teaches none we parse."""
    for fmt in _FORMATS:
        if chat_template and fmt.detect(chat_template):
            return fmt.names[0]
    return None
