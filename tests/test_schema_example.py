"""The demo model's JSON answers: valid for the schema it was asked for."""

from __future__ import annotations

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from tabby_fixed.engine.schema_example import example

_NAMES = st.text("abcxyz", min_size=1, max_size=4)
_LEAVES = st.one_of(
    st.builds(lambda n, m: {"type": "string", "minLength": n, "maxLength": n + m},
              st.integers(0, 12), st.integers(0, 5)),
    st.builds(lambda low: {"type": "integer", "minimum": low}, st.integers(-5, 5)),
    st.builds(lambda low: {"type": "number", "exclusiveMinimum": low}, st.integers(-5, 5)),
    st.just({"type": "boolean"}), st.just({"type": ["null", "string"]}),
    st.builds(lambda values: {"enum": values}, st.lists(st.integers() | st.text(max_size=3), min_size=1, max_size=3)),
    st.builds(lambda value: {"const": value}, st.text(max_size=3)),
)


def _containers(children):
    objects = st.builds(
        lambda props, required: {"type": "object", "properties": props,
                                 "required": [k for k in props if required], "additionalProperties": False},
        st.dictionaries(_NAMES, children, max_size=3), st.booleans())
    arrays = st.builds(lambda items, low: {"type": "array", "items": items, "minItems": low},
                       children, st.integers(0, 2))
    unions = st.builds(lambda options: {"anyOf": options}, st.lists(children, min_size=1, max_size=2))
    return objects | arrays | unions


@settings(max_examples=150, deadline=None)
@given(st.recursive(_LEAVES, _containers, max_leaves=8))
def test_the_example_is_valid_for_its_schema(schema):
    jsonschema.validate(example(schema), schema)


def test_references_are_followed():
    schema = {"$defs": {"city": {"type": "string", "minLength": 9}},
              "type": "object", "properties": {"to": {"$ref": "#/$defs/city"}}, "required": ["to"]}
    jsonschema.validate(example(schema), schema)
