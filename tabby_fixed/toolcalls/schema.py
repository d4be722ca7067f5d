"""Tool schemas decide argument types.

The whole reason this project exists: a parameter whose schema admits only a string keeps the
model's text exactly, even when that text happens to be valid JSON (``123``, ``true``, ``null``,
``[1, 2]``) or starts with indentation. Only parameters the schema types as something else are
converted, and only unknown tools or parameters fall back to guessing.

>>> kinds = ToolSchemas([{"type": "function", "function": {"name": "write_file",
...     "parameters": {"properties": {"content": {"type": "string"},
...                                   "mode": {"type": "integer"}}}}}])
>>> convert_value("\\n123\\n", kinds.kind("write_file", "content"), framing=True)
'123'
>>> convert_value("\\n644\\n", kinds.kind("write_file", "mode"), framing=True)
644
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

#: A parameter's kind: the JSON types its schema admits, or None when the schema is unknown.
Kind = frozenset[str] | None

JSON_TYPES = ("null", "boolean", "integer", "number", "array", "object", "string")
_TYPE_OF_PYTHON = {bool: "boolean", int: "integer", float: "number", str: "string",
                   list: "array", dict: "object", type(None): "null"}


def _types_of(schema: Any) -> Kind:
    """The JSON types a (sub)schema admits; None when it does not say."""
    if not isinstance(schema, Mapping):
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset([declared]) if declared in JSON_TYPES else None
    if isinstance(declared, list):
        types = frozenset(t for t in declared if t in JSON_TYPES)
        return types or None
    for union_key in ("anyOf", "oneOf"):
        members = schema.get(union_key)
        if isinstance(members, list) and members:
            union: set[str] = set()
            for member in members:
                member_types = _types_of(member)
                if member_types is None:
                    return None
                union |= member_types
            return frozenset(union)
    if "const" in schema:
        return _types_of_values([schema["const"]])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _types_of_values(schema["enum"])
    if "properties" in schema:
        return frozenset(["object"])
    if "items" in schema:
        return frozenset(["array"])
    return None


def _types_of_values(values: Iterable[Any]) -> Kind:
    types = {_TYPE_OF_PYTHON.get(type(v)) for v in values}
    return None if None in types else frozenset(t for t in types if t is not None)


def is_string_kind(kind: Kind) -> bool:
    """True when the schema admits a string and nothing else but null: the text is kept as written."""
    return kind is not None and "string" in kind and kind <= {"string", "null"}


class ToolSchemas:
    """Per tool, per parameter kinds, built once per request from its OpenAI ``tools`` list.

    Malformed entries are skipped rather than rejected: the server validates the request, the
    parser only needs whatever typing information is there.
    """

    def __init__(self, tools: Iterable[Any] | None) -> None:
        self._kinds: dict[str, dict[str, Kind]] = {}
        for tool in tools or ():
            if not isinstance(tool, Mapping):
                continue
            function = tool.get("function", tool)
            if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
                continue
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
            self._kinds[function["name"]] = {
                key: _types_of(sub)
                for key, sub in (properties.items() if isinstance(properties, Mapping) else ())
            }

    def declares(self, tool: str) -> bool:
        return tool in self._kinds

    def kind(self, tool: str, parameter: str) -> Kind:
        return self._kinds.get(tool, {}).get(parameter)


def trim_framing(text: str) -> str:
    """Remove the one newline the template writes after the opening tag and before the closing one."""
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} does not fit a JSON number")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_json(text: str) -> Any:
    """``json.loads`` for model output: raw control characters allowed inside strings (models write
    them), NaN, Infinity and overflowing numbers refused (they would not survive ``json.dumps``)."""
    return json.loads(text, strict=False, parse_float=_finite_float, parse_constant=_no_constant)


def _try_json(text: str) -> tuple[bool, Any]:
    try:
        return True, loads_json(text)
    except (ValueError, RecursionError):
        return False, None


def _as_type(text: str, json_type: str) -> tuple[bool, Any]:
    """Read stripped text as one JSON type, accepting what Qwen and Seed templates render."""
    if json_type == "null":
        return (True, None) if text in ("null", "None") else (False, None)
    if json_type == "boolean":
        lowered = text.lower()
        return (True, lowered == "true") if lowered in ("true", "false") else (False, None)
    if json_type in ("integer", "number"):
        ok, value = _try_json(text)
        ok = ok and isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, value
    container = list if json_type == "array" else dict
    ok, value = _try_json(text)
    if ok and isinstance(value, container):
        return True, value
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    return _as_json(value) if isinstance(value, container) else (False, None)


def _as_json(value: Any) -> tuple[bool, Any]:
    """What JSON makes of a Python literal: tuples become lists, keys strings; sets, bytes and
    complex numbers have no JSON form."""
    try:
        return True, json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return False, None


def convert_value(raw: str, kind: Kind, *, framing: bool) -> Any:
    """A parameter's value from the text between its tags.

    String-only kinds keep the text exactly (minus the template's framing newlines when the
    format has them). Typed kinds are stripped and converted; text that does not convert stays
    text. Unknown kinds and string unions are guessed: JSON when it parses, else the text.
    """
    if is_string_kind(kind):
        return trim_framing(raw) if framing else raw
    text = raw.strip()
    if kind is None or "string" in kind:
        ok, value = _try_json(text)
        return value if ok else text
    for json_type in JSON_TYPES[:-1]:
        if json_type in kind:
            ok, value = _as_type(text, json_type)
            if ok:
                return value
    return text


def conform_json_arguments(tool: str, arguments: dict[str, Any], schemas: ToolSchemas) -> dict[str, Any]:
    """Arguments that arrived as JSON: a string parameter given a number or boolean gets its text."""
    return {
        key: json.dumps(value) if is_string_kind(schemas.kind(tool, key))
        and isinstance(value, (bool, int, float)) else value
        for key, value in arguments.items()
    }
