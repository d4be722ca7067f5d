"""Settings this build accepts (an upstream config.yml must load) but cannot honour, each with why.

A TabbyAPI user who swaps servers keeps their config.yml. Every key in it must either do what it
does upstream or be named at start-up, so nothing is ignored silently. ``UNSUPPORTED`` lists the
keys whose value can ask for something this build does not do; a key is reported only when its
value asks for that (``vision: false`` asks for nothing), so upstream's own sample stays quiet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import TabbyConfig

log = logging.getLogger(__name__)

LATER = "not supported by this build yet"
ROPE = "ExLlamaV3 reads RoPE scaling from the model's config.json (upstream's ExLlamaV3 backend ignores it too)"


@dataclass(frozen=True)
class Unsupported:
    """``section.key``, when its value asks for what this build cannot do, and the reason."""

    section: str
    key: str
    asks: Callable[[Any], bool]
    reason: str


UNSUPPORTED: tuple[Unsupported, ...] = (
    Unsupported("model", "rope_scale", lambda v: v not in (None, 1.0), ROPE),
    Unsupported("model", "rope_alpha", lambda v: v is not None, ROPE),
    Unsupported("draft_model", "draft_rope_scale", lambda v: v not in (None, 1.0), ROPE),
    Unsupported("draft_model", "draft_rope_alpha", lambda v: v is not None, ROPE),
    Unsupported("lora", "loras", bool, "ExLlamaV3 cannot load LoRAs (upstream's ExLlamaV3 backend refuses them too)"),
    Unsupported("developer", "seqlog", bool, "logs go to stderr only; there is no Seq sender"),
    Unsupported("developer", "unsafe_launch", bool, "there is no dependency version check to skip"),
)


def unsupported_settings(config: TabbyConfig) -> list[str]:
    """``section.key (reason)`` for every setting whose value asks for what this build does not do."""
    return [f"{entry.section}.{entry.key} ({entry.reason})" for entry in UNSUPPORTED
            if entry.asks(getattr(getattr(config, entry.section), entry.key))]


def warn_unsupported(config: TabbyConfig) -> None:
    """One start-up line naming them all, or nothing when the config asks for nothing unsupported."""
    names = unsupported_settings(config)
    if names:
        log.warning("settings accepted but not honoured by this build: %s", "; ".join(names))
