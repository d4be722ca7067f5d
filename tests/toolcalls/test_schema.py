"""The schema decides the type: kinds read from tool schemas, and values converted by kind."""

from __future__ import annotations

import pytest

from tabby_fixed.toolcalls.schema import ToolSchemas, convert_value, is_string_kind


def kind_of(schema: dict):
    return ToolSchemas([{"type": "function", "function": {"name": "t", "parameters": {
        "type": "object", "properties": {"p": schema}}}}]).kind("t", "p")


@pytest.mark.parametrize("schema", [
    {"type": "string"}, {"type": ["string", "null"]}, {"anyOf": [{"type": "string"}, {"type": "null"}]},
    {"oneOf": [{"type": "string"}]}, {"enum": ["a", "b"]}, {"const": "x"}, {"type": "string", "enum": ["1", "2"]},
])
def test_string_only_schemas(schema):
    assert is_string_kind(kind_of(schema))


@pytest.mark.parametrize(("schema", "kind"), [
    ({"type": "integer"}, {"integer"}), ({"type": ["integer", "string"]}, {"integer", "string"}),
    ({"anyOf": [{"type": "number"}, {"type": "null"}]}, {"number", "null"}), ({"enum": [1, 2]}, {"integer"}),
    ({"properties": {}}, {"object"}), ({"items": {}}, {"array"}), ({}, None), ({"anyOf": [{}, {"type": "x"}]}, None),
    ({"type": "nonsense"}, None), ({"$ref": "#/$defs/x"}, None),
])
def test_other_schemas(schema, kind):
    assert kind_of(schema) == (frozenset(kind) if kind is not None else None)
    assert not is_string_kind(kind_of(schema))


def test_malformed_tools_are_skipped_not_fatal():
    schemas = ToolSchemas([None, "x", {"function": {"name": 3}}, {"type": "function", "function": {"name": "ok"}},
                           {"name": "flat", "parameters": {"properties": {"a": {"type": "integer"}}}}])
    assert schemas.declares("ok") and schemas.kind("ok", "a") is None
    assert schemas.kind("flat", "a") == frozenset(["integer"])


STRING, STRING_OR_NULL = frozenset(["string"]), frozenset(["string", "null"])


@pytest.mark.parametrize(("raw", "kind", "value"), [
    ("\n123\n", STRING, "123"), ("\nnull\n", STRING_OR_NULL, "null"), ("\n    x\n\n", STRING, "    x\n"),
    ("\n42\n", frozenset(["integer"]), 42), (" 4.5 ", frozenset(["number"]), 4.5),
    ("True", frozenset(["boolean"]), True), ("FALSE", frozenset(["boolean"]), False),
    ("None", frozenset(["null", "integer"]), None), ("7", frozenset(["null", "integer"]), 7),
    ("['a', 'b']", frozenset(["array"]), ["a", "b"]), ("{'a': (1, 2)}", frozenset(["object"]), {"a": [1, 2]}),
    ("{1: {2}}", frozenset(["object"]), "{1: {2}}"),
    ('{"a": 1}', frozenset(["object"]), {"a": 1}), ("[1]", frozenset(["object"]), "[1]"),
    ("forty", frozenset(["integer"]), "forty"), ("1e400", frozenset(["number"]), "1e400"),
    ("NaN", frozenset(["number"]), "NaN"), ("__import__('os')", frozenset(["array"]), "__import__('os')"),
    (" 42 ", frozenset(["integer", "string"]), 42), (" x ", frozenset(["integer", "string"]), "x"),
    (" [1] ", None, [1]), (" true ", None, True), (" hello ", None, "hello"),
])
def test_convert_value(raw, kind, value):
    converted = convert_value(raw, kind, framing=True)
    assert converted == value and type(converted) is type(value)


def test_no_framing_keeps_every_newline():
    assert convert_value("\nx\n", STRING, framing=False) == "\nx\n"
