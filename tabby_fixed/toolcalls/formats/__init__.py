"""The registry: one entry per format, TabbyAPI's ``tool_format`` aliases as extra keys."""

from __future__ import annotations

from types import MappingProxyType

from .base import CallFormat
from .deepseek import DeepSeekV4, DeepSeekV31, DeepSeekV32
from .gemma4 import Gemma4
from .glm4_5 import Glm45, Glm47
from .harmony import Harmony
from .hermes import Hermes
from .hy3 import Hy3, Hy3Preview
from .kimi_k2 import KimiK2
from .minimax_m2 import MiniMaxM2
from .mistral import Mistral, MistralOld
from .muse_glimmer import MuseGlimmer
from .qwen3_coder import Qwen3Coder
from .seed_oss import SeedOss


class UnknownFormatError(ValueError):
    """A tool format name that is not registered; the message lists the known ones."""


#: Most specific first: detection asks them in this order.
_FORMATS: tuple[CallFormat, ...] = (
    MiniMaxM2(), Glm47(), Glm45(), Hy3(), Hy3Preview(), SeedOss(), Qwen3Coder(), KimiK2(), DeepSeekV31(),
    DeepSeekV32(), DeepSeekV4(), Mistral(), MistralOld(), Harmony(), MuseGlimmer(), Gemma4(), Hermes(),
)

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


def reasoning_tags(name: str | None, chat_template: str | None) -> tuple[str, str] | None:
    """The reasoning tags a format's family uses when they are not ``<think>``/``</think>``: the
    pair whose opening tag the chat template mentions, else the family's first; None for ``<think>``."""
    pairs = FORMATS[name].reasoning_tags if name in FORMATS else ()
    return next((pair for pair in pairs if chat_template and pair[0] in chat_template), pairs[0] if pairs else None)
