"""The one error type the server answers with, shaped as OpenAI's error body.

Everything a client can get wrong, and everything that fails on our side, ends up as an
``ApiError`` carrying an HTTP status and a message a person can act on. The server maps it to::

    {"error": {"message": ..., "type": ..., "param": ..., "code": ...}, "detail": ...}

``detail`` repeats the message because upstream TabbyAPI answers ``{"detail": ...}`` and clients
written against it read that key; OpenAI clients read ``error``.

Kinds of error, by ``type``:

- ``invalid_request_error`` (400, 404, 413, 422): the request cannot be served as written.
- ``authentication_error`` (401): a key is missing or wrong.
- ``permission_error`` (403): the key is valid but not allowed here.
- ``server_error`` (500, 503): our side failed or is not ready; the request may be retried.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None, trace: str | None = None) -> None:
        message = _encodable(message)
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = _encodable(param) if param is not None else None
        self.trace = trace  # a server traceback, sent only with network.send_tracebacks

    def body(self) -> dict[str, Any]:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        if self.trace:
            error["trace"] = self.trace
        return {"error": error, "detail": self.message}


def _encodable(text: str) -> str:
    """A message or param may quote the request; a lone surrogate in it is written as ``\\udXXX``,
    since no UTF-8 encoder takes it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, type="authentication_error", code="invalid_api_key")


def not_found(message: str, param: str | None = None) -> ApiError:
    return ApiError(404, message, code="not_found", param=param)


def unavailable(message: str) -> ApiError:
    return ApiError(503, message, type="server_error", code="unavailable")
