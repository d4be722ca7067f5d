"""A JSON value valid for a schema, for the scripted demo model: it answers any request that
carries ``response_format`` (or ``json_schema``) with one, whatever the prompt, so structured output
can be tried without a GPU. Covers the common keywords; what it gets wrong the grammar check reports."""

from __future__ import annotations

from typing import Any

_EMPTY = {"string": "example", "integer": 0, "number": 0, "boolean": True, "null": None, "array": [], "object": {}}


def example(schema: Any, root: Any = None) -> Any:
    """A value the schema accepts: the first ``enum``/``const``/``examples``/``default``, else one built
    from ``type``, with every required property (and the others, when nothing is required)."""
    root = schema if root is None else root
    if not isinstance(schema, dict):
        return {}
    if isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        target: Any = root
        for part in schema["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return example(target, root)
    if "const" in schema:
        return schema["const"]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example(schema[key][0], root)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties") or {}
        wanted = schema.get("required") or list(properties)
        return {key: example(properties.get(key, {}), root) for key in wanted}
    if kind == "array":
        return [example(schema.get("items", {}), root) for _ in range(int(schema.get("minItems", 0)))]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        return int(low) if kind == "integer" else low
    if kind == "string":
        size = int(schema.get("minLength", 0))
        return "example".ljust(size, "x")[:max(size, int(schema.get("maxLength", 7)))]
    return _EMPTY.get(kind)
