"""Markup the model writes that several modules know by default: one place for each literal.

The reasoning tags are defaults only; a model's settings (``reasoning_start_token``,
``reasoning_end_token``) may name others.
"""

from __future__ import annotations

from typing import Final

THINK_START: Final = "<think>"
THINK_END: Final = "</think>"
