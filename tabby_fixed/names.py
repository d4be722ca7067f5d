"""Names that become file names (presets, templates): plain, so they cannot leave their folder."""

from __future__ import annotations

import re

from .errors import ApiError

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
#: Longer names are refused rather than handed to a file system that would fail on them.
MAX_NAME_CHARS = 200


def plain_name(name: str, param: str) -> str:
    if not isinstance(name, str) or not _PLAIN.fullmatch(name) or ".." in name or len(name) > MAX_NAME_CHARS:
        raise ApiError(400, f"'{str(name)[:MAX_NAME_CHARS]}' is not a usable name: letters, digits, '_', '-' and "
                            f"'.' only, at most {MAX_NAME_CHARS} characters.", param=param)
    return name
