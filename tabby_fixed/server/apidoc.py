"""``/openapi.json`` that says what each route takes: its request body and the key it needs.

The routes read their bodies themselves (to bound size and nesting before parsing), so FastAPI
cannot see the bodies; they are declared here from the same pydantic models. Keys are checked
by the ``require_api`` and ``require_admin`` dependencies, which this reads off each route, so
clients, code generators and fuzzers learn the security schemes without a second list to keep.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from ..auth import require_admin, require_api
from .admin import ModelLoad, PresetSwitch, TemplateSwitch
from .anthropic_models import MessagesRequest
from .requests import ChatCompletionRequest, CompletionRequest, DecodeRequest, EncodeRequest
from .responses_models import ResponsesRequest

#: (method, path) -> the model its JSON body is read as.
BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("post", "/v1/chat/completions"): ChatCompletionRequest,
    ("post", "/v1/completions"): CompletionRequest,
    ("post", "/v1/messages"): MessagesRequest,
    ("post", "/v1/messages/count_tokens"): MessagesRequest,
    ("post", "/v1/responses"): ResponsesRequest,
    ("post", "/v1/token/encode"): EncodeRequest,
    ("post", "/v1/token/decode"): DecodeRequest,
    ("post", "/v1/sampling/override/switch"): PresetSwitch,
    ("post", "/v1/template/switch"): TemplateSwitch,
    ("post", "/v1/model/load"): ModelLoad,
}

SECURITY_SCHEMES = {
    "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
    "adminKey": {"type": "apiKey", "in": "header", "name": "x-admin-key"},
    "bearer": {"type": "http", "scheme": "bearer", "description": "the API key, or the admin key"},
}
_NEEDS = {require_api: [{"apiKey": []}, {"bearer": []}], require_admin: [{"adminKey": []}, {"bearer": []}]}


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and so ``/openapi.json``) return the completed document."""
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def document(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
    components = doc.setdefault("components", {})
    components["securitySchemes"] = SECURITY_SCHEMES
    schemas = components.setdefault("schemas", {})
    keys = {(method.lower(), route.path): _security(route)
            for route in _api_routes(app.routes) for method in route.methods}
    for path, operations in doc.get("paths", {}).items():
        for method, operation in operations.items():
            operation["security"] = keys.get((method, path), [])
            model = BODIES.get((method, path))
            if model is not None:
                schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
                schemas.update(schema.pop("$defs", {}))
                schemas[model.__name__] = schema
                operation["requestBody"] = {"required": True, "content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}
    return doc


def _api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """Every APIRoute, also inside included routers (newer FastAPI keeps those as one entry)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _api_routes(inner.routes)


def _security(route: APIRoute) -> list[dict[str, list[str]]]:
    """The strictest key among the route's dependencies; [] for a public route."""
    calls = set(_calls(route.dependant))
    for check in (require_admin, require_api):
        if check in calls:
            return _NEEDS[check]
    return []


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)
