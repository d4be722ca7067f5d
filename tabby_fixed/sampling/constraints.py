"""Structured output: ``response_format`` and TabbyAPI's ``json_schema``, ``regex_pattern`` and
``grammar_string`` fields, or the request's tool-call grammar, made into the one constraint an
engine applies: one LLGuidance grammar, checked when the request arrives (what LLGuidance refuses
is a 400 naming the field), that starts after the reasoning section of a reasoning model."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import llguidance
from llguidance.gbnf_to_lark import any_to_lark

from ..engine.base import Constraint
from ..errors import ApiError
from ..output import ReasoningSettings
from .tool_grammar import Literals

#: The request field each kind of constraint comes from, for error messages.
CONSTRAINT_FIELDS = {"json": "response_format", "json_schema": "json_schema", "regex": "regex_pattern",
                     "grammar": "grammar_string", "tools": "tools"}


def _schema(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ApiError(400, f"{param} must be a JSON schema object.", param=param)
    try:
        jsonschema.Draft202012Validator.check_schema(value)
    except jsonschema.SchemaError as error:
        raise ApiError(400, f"{param} is not a valid JSON schema: {error.message}", param=param) from None
    try:  # a schema such as {"$ref": "#"} recurses forever on any value; better said now than mid-answer
        validator = jsonschema.Draft202012Validator(value)
        probes: tuple[object, ...] = (None, {}, [])
        for probe in probes:
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


def _source(constraint: Constraint) -> dict[str, Any]:
    """The constraint as one LLGuidance grammar entry."""
    if constraint.kind == "json":
        return {"json_schema": {"type": "object"}}
    if constraint.kind == "json_schema":
        return {"json_schema": constraint.value}
    if constraint.kind == "regex":
        return {"lark_grammar": f"start: /{llguidance.regex_to_lark(constraint.value)}/"}
    text = str(constraint.value)
    if constraint.kind == "grammar" and "::=" in text:
        try:
            text = any_to_lark(text)
        except Exception as error:  # the converter raises whatever its parsing hits
            raise ApiError(400, f"grammar_string is not a GBNF grammar LLGuidance can read: {error}",
                           param="grammar_string") from None
    return {"lark_grammar": text}


def compiled(constraint: Constraint, reasoning: ReasoningSettings | None = None,
             added_tokens: Mapping[str, int] | None = None) -> Constraint:
    """The constraint with its whole LLGuidance grammar, refused with a 400 naming its field when
    LLGuidance cannot use it. With a reasoning model the output first runs free to the end of the
    reasoning section (it may open one itself when the prompt has not), and the constraint applies
    to what follows."""
    head = "start: @body"
    rules: list[str] = []
    if reasoning is not None:
        literal = Literals(added_tokens or {})
        body, lazy = literal.anything_until(reasoning.end_tag)
        rules = [f"think{'[lazy]' if lazy else ''}: {body}", "GAP: /[ \t\r\n]*/"]
        opened = "think" if reasoning.start_in_reasoning else f"({literal(reasoning.start_tag)} think)?"
        head = f"start: {opened} GAP @body"
    grammar = json.dumps({"grammars": [{"lark_grammar": "\n".join([head, *rules])},
                                       {"name": "body", **_source(constraint)}]})
    problem = llguidance.LLMatcher.validate_grammar(grammar)
    if problem:
        field = CONSTRAINT_FIELDS[constraint.kind]
        said = " ".join(line.strip() for line in problem.splitlines() if line.strip() and not line.startswith(" "))
        raise ApiError(400, f"{field} cannot be used to constrain the output: {said[:400]}", param=field)
    return dataclasses.replace(constraint, grammar=grammar)
