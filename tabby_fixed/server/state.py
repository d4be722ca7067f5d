"""What the routes share: the loaded model, and reading a request body within its size limit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import FastAPI, Request

from ..config import TabbyConfig
from ..errors import ApiError, unauthorized, unavailable
from .models import LoadedModel, model_folder
from .requests import RequestBody, parse_body

logger = logging.getLogger(__name__)
T = TypeVar("T")
B = TypeVar("B", bound=RequestBody)


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
        if permission != "admin":  # before looking: an API key learns nothing about which folders exist
            raise unauthorized(f"Loading '{requested[:200]}' on request needs the admin key.")
        model_folder(config, requested, param="model")
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


async def read_json(request: Request, model: type[B]) -> B:
    """The body as the given model, within the size and nesting limits of ``network``."""
    return parse_body(await read_body(request), model, request.app.state.config.network.max_json_depth)


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(413, f"The request body is {size} bytes or more; this server accepts at most {limit} "
                         f"(network.max_request_bytes).", code="request_too_large")


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """The work's result, for a response sent only once it is complete (a JSON body).

    A streamed response is cancelled by Starlette when its client goes away; a plain one is not,
    so its jobs would run to the end for nobody. Here the work is cancelled as soon as the
    client disconnects (its jobs with it), and the request ends with a 499 nobody receives.
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, gone):
            if not pending.done():
                pending.cancel()
        await asyncio.gather(task, gone, return_exceptions=True)
    if task.cancelled() and gone.done() and not gone.cancelled():
        raise ApiError(499, "The client closed the connection before the answer was complete.",
                       code="client_closed_request")
    return task.result()


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (the body has been read, so nothing else arrives)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
