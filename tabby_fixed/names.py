"""Names that become file names (presets, templates): plain, so they cannot leave their folder."""

from __future__ import annotations

import re

from .errors import ApiError

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def plain_name(name: str, param: str) -> str:
    if not isinstance(name, str) or not _PLAIN.fullmatch(name) or ".." in name:
        raise ApiError(400, f"'{name}' is not a usable name: letters, digits, '_', '-' and '.' only.", param=param)
    return name
