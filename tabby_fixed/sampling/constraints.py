"""Structured output: ``response_format`` and TabbyAPI's ``json_schema``, ``regex_pattern`` and
``grammar_string`` fields, made into the one constraint an engine applies."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from ..engine.base import Constraint
from ..errors import ApiError


def _schema(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ApiError(400, f"{param} must be a JSON schema object.", param=param)
    try:
        jsonschema.Draft202012Validator.check_schema(value)
    except jsonschema.SchemaError as error:
        raise ApiError(400, f"{param} is not a valid JSON schema: {error.message}", param=param) from None
    try:  # a schema such as {"$ref": "#"} recurses forever on any value; better said now than mid-answer
        validator = jsonschema.Draft202012Validator(value)
        for probe in (None, {}, []):
            validator.is_valid(probe)
    except RecursionError:
        raise ApiError(400, f"{param} refers to itself without end (a $ref cycle that reads no part of the value).",
                       param=param) from None
    return value


def constraint_for(response_format: Any, sampler: Mapping[str, Any]) -> Constraint | None:
    """At most one constraint; asking for two is a 400 rather than a silent choice."""
    found: list[tuple[str, Constraint]] = []
    kind = getattr(response_format, "type", "text")
    if kind in ("json_object", "json"):
        found.append(("response_format", Constraint("json")))
    elif kind == "json_schema":
        wrapper = response_format.json_schema or {}
        schema = wrapper.get("schema", wrapper) if isinstance(wrapper, dict) else wrapper
        found.append(("response_format", Constraint("json_schema", _schema(schema, "response_format.json_schema"))))
    if sampler.get("json_schema") is not None:
        found.append(("json_schema", Constraint("json_schema", _schema(sampler["json_schema"], "json_schema"))))
    if sampler.get("regex_pattern"):
        try:
            re.compile(sampler["regex_pattern"])
        except re.error as error:
            raise ApiError(400, f"regex_pattern does not compile: {error}", param="regex_pattern") from None
        found.append(("regex_pattern", Constraint("regex", sampler["regex_pattern"])))
    if sampler.get("grammar_string"):
        found.append(("grammar_string", Constraint("grammar", sampler["grammar_string"])))
    if len(found) > 1:
        raise ApiError(400, f"Give at most one output constraint; this request has {', '.join(n for n, _ in found)}.",
                       param=found[1][0])
    return found[0][1] if found else None
