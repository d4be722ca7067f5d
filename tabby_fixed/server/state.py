"""What the routes share: the loaded model, and reading a request body within its size limit."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request

from ..config import TabbyConfig
from ..errors import ApiError, unauthorized, unavailable
from .models import LoadedModel, model_folder

logger = logging.getLogger(__name__)


async def serving(app: FastAPI, requested: str | None, permission: str) -> LoadedModel:
    """The model that answers a request.

    Like upstream, a ``model`` naming something else is ignored (clients send aliases), unless
    inline loading is on: then an admin key loads that folder first, and an API key gets 401.
    Dummy model names are always served by the loaded model. With ``model.models``, the model
    manager picks (and loads) the served model the request names.
    """
    config: TabbyConfig = app.state.config
    if config.model.models:
        return await app.state.models.serve(requested)
    model: LoadedModel | None = app.state.model
    if requested and config.model.inline_model_loading and requested not in config.model.dummy_model_names \
            and (model is None or requested != model.name):
        folder = model_folder(config, requested, param="model")
        if permission != "admin":
            raise unauthorized(f"Loading '{folder.name}' on request needs the admin key.")
        await app.state.models.load(requested, request={})
        model = app.state.model
    if model is None:
        raise unavailable("No models are currently loaded. Set model.model_name in config.yml, or load one "
                          "with POST /v1/model/load.")
    return model


async def read_body(request: Request) -> bytes:
    """The body, refused with 413 as soon as it exceeds ``network.max_request_bytes``."""
    limit = request.app.state.config.network.max_request_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(413, f"The request body is {size} bytes or more; this server accepts at most {limit} "
                         f"(network.max_request_bytes).", code="request_too_large")
