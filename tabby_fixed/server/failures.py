"""Domain errors (``domain_errors``) to API errors: the one place that gives each a status, a code
and the request field it is reported against. ``app.py`` and the streaming guard both translate
through here; each API then writes the ``ApiError`` in its own shape (OpenAI's ``body()``,
Anthropic's ``anthropic.error_body``).
"""

from __future__ import annotations

from ..domain_errors import (
    ArgumentsNotJson,
    ConstraintRejected,
    ContextTooLong,
    DomainError,
    ImagesUnsupported,
    ImageUnreadable,
    NoChatTemplate,
    ReservedTemplateVariable,
    TemplateFailed,
)
from ..errors import ApiError

#: status and code per kind of domain error
_SHAPES: dict[type[DomainError], tuple[int, str | None]] = {
    ContextTooLong: (400, "context_length_exceeded"),
    NoChatTemplate: (422, "no_chat_template"),
    TemplateFailed: (400, "template_error"),
    ArgumentsNotJson: (400, None),
    ReservedTemplateVariable: (400, None),
    ConstraintRejected: (400, None),
    ImagesUnsupported: (400, "images_unsupported"),
    ImageUnreadable: (400, None),
}

#: the request field a route makes its prompt from, for errors about the prompt as a whole
_PROMPT_FIELDS = {"/v1/completions": "prompt", "/v1/responses": "input"}


def prompt_field(path: str) -> str:
    """The field a route's prompt comes from: ``prompt`` for text completions, ``input`` for
    Responses, ``messages`` for every chat-shaped route."""
    return _PROMPT_FIELDS.get(path.rstrip("/"), "messages")


def api_error(error: DomainError, path: str = "") -> ApiError:
    status, code = _SHAPES.get(type(error), (400, None))
    field = error.field
    if field is None and isinstance(error, ContextTooLong):
        field = prompt_field(path)
    return ApiError(status, error.message, code=code, param=field)
