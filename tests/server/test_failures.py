"""Every domain error has its status and code in the one translation table, and an over-long
prompt is reported against the field the route made its prompt from."""

from __future__ import annotations

import pytest

from tabby_fixed import domain_errors
from tabby_fixed.domain_errors import ConstraintRejected, ContextTooLong, DomainError
from tabby_fixed.server.failures import _SHAPES, api_error


def test_every_domain_error_has_a_shape():
    kinds = {value for value in vars(domain_errors).values()
             if isinstance(value, type) and issubclass(value, DomainError) and value is not DomainError}
    assert kinds == set(_SHAPES)


@pytest.mark.parametrize(("path", "field"), [
    ("/v1/chat/completions", "messages"), ("/v1/completions", "prompt"), ("/v1/responses", "input"),
    ("/v1/messages", "messages"),
])
def test_the_prompt_is_named_by_the_route(path: str, field: str):
    error = api_error(ContextTooLong(5000, 4096), path)
    assert (error.status, error.code, error.param) == (400, "context_length_exceeded", field)
    assert "4096" in error.message and "5000" in error.message


def test_a_field_the_pipeline_names_is_kept():
    error = api_error(ConstraintRejected("regex_pattern cannot be used", "regex_pattern"), "/v1/completions")
    assert (error.status, error.param) == (400, "regex_pattern")
