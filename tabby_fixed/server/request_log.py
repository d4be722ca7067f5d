"""``logging.log_requests``: each request's method, URL, headers and body in the log, as upstream.

Upstream logs the headers as sent, API keys included; here the key headers are redacted, so a
log shared in a bug report leaks no key. The body is logged as the route reads it (the middleware
watches ``receive``), so nothing is buffered twice and the body size limit still applies.
"""

from __future__ import annotations

import logging

from starlette.types import Message, Receive, Scope, Send

from .asgi import HttpMiddleware

logger = logging.getLogger(__name__)

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-admin-key", "proxy-authorization", "cookie"})


def redacted_headers(scope: Scope) -> dict[str, str]:
    headers = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        headers[name] = "[redacted]" if name in SECRET_HEADERS else raw_value.decode("latin-1")
    return headers


class RequestLog(HttpMiddleware):
    """Logs every HTTP request once its body has been read (or at once, for a request without one)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = scope.get("query_string", b"").decode("latin-1")
        line = f"{scope['method']} {scope['path']}{'?' + query if query else ''}"
        headers = redacted_headers(scope)
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            logger.info("request %s headers=%s", line, headers)
            await self.app(scope, receive, send)
            return
        body = bytearray()

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    logger.info("request %s headers=%s body=%s", line, headers, body.decode("utf-8", "replace"))
            return message

        await self.app(scope, watched, send)
