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
#: The values a parameter's ``enum`` or ``const`` allows, or None when the schema lists none.
Choices = tuple[Any, ...] | None

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
    return None if None in types else frozenset(types)  # type: ignore[arg-type]


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
        self._choices: dict[tuple[str, str], tuple[Any, ...]] = {}
        for tool in tools or ():
            if not isinstance(tool, Mapping):
                continue
            function = tool.get("function", tool)
            if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
                continue
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
            properties = properties if isinstance(properties, Mapping) else {}
            self._kinds[function["name"]] = {key: _types_of(sub) for key, sub in properties.items()}
            for key, sub in properties.items():
                choices = _choices_of(sub)
                if choices is not None:
                    self._choices[function["name"], key] = choices

    def declares(self, tool: str) -> bool:
        return tool in self._kinds

    def kind(self, tool: str, parameter: str) -> Kind:
        return self._kinds.get(tool, {}).get(parameter)

    def choices(self, tool: str, parameter: str) -> Choices:
        return self._choices.get((tool, parameter))


def _choices_of(schema: Any) -> Choices:
    if not isinstance(schema, Mapping):
        return None
    if "const" in schema:
        return (schema["const"],)
    values = schema.get("enum")
    return tuple(values) if isinstance(values, list) and values else None


def streams_as_text(kind: Kind, choices: Choices) -> bool:
    """Whether a value is certainly its text, so it can stream as it arrives: a string kind whose
    enum or const, if any, allows nothing but strings."""
    return is_string_kind(kind) and all(isinstance(choice, str) for choice in choices or ())


def trim_framing(text: str) -> str:
    """Remove the one newline the template writes after the opening tag and before the closing one."""
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} does not fit a JSON number")
    return value


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: The decoder ``loads_json`` uses, for reading one value out of longer text (``raw_decode``).
JSON_DECODER = json.JSONDecoder(strict=False, parse_float=finite_float, parse_constant=no_constant)


def loads_json(text: str) -> Any:
    """``json.loads`` for model output: raw control characters allowed inside strings (models write
    them), NaN, Infinity and overflowing numbers refused (they would not survive ``json.dumps``)."""
    return json.loads(text, strict=False, parse_float=finite_float, parse_constant=no_constant)


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


def _chosen(raw: str, kind: Kind, choices: tuple[Any, ...], framing: bool) -> tuple[bool, Any]:
    """The reading of the text that the enum or const allows: the text itself first, then its
    typed readings (``null`` is None only where ``"null"`` is not allowed)."""
    text = trim_framing(raw) if framing else raw
    readings = [text]
    for json_type in JSON_TYPES[:-1]:
        if kind is None or json_type in kind:
            ok, value = _as_type(text.strip(), json_type)
            readings += [value] if ok else []
    for value in readings:
        if any(value == choice and type(value) is type(choice) for choice in choices):
            return True, value
    return False, None


def convert_value(raw: str, kind: Kind, *, framing: bool, choices: Choices = None) -> Any:
    """A parameter's value from the text between its tags.

    An enum or const decides first: the reading it allows wins. Otherwise string-only kinds keep
    the text exactly (minus the template's framing newlines when the format has them). Typed
    kinds are stripped and converted; text that does not convert stays text. Unknown kinds and
    string unions are guessed: JSON when it parses, else the text.
    """
    if choices:
        found, value = _chosen(raw, kind, choices, framing)
        if found:
            return value
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
