"""One wording for pydantic's validation errors, wherever a body, preset or model card is checked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def first_problem(errors: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """Where the first problem is (a dotted path; ``body`` for the whole) and a sentence saying it,
    with a count of the others: a client fixes one thing at a time, but should know there are more."""
    if not errors:
        return "body", "body: invalid"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return where, f"{where}: {first['msg']}{more}"
