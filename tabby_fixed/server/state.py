"""What the routes depend on: the app's state, typed; the key a request carries; the loaded model;
and reading a request body within its size limit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated, TypeVar

from fastapi import Depends, Request
from starlette.applications import Starlette
from starlette.datastructures import State

from ..auth import KeyStore, Permission
from ..config import TabbyConfig
from ..errors import ApiError, unauthorized, unavailable
from ..sampling import Preset
from .models import LoadedModel, ModelManager, model_folder
from .requests import Body, parse_body
from .response_store import ResponseStore

if TYPE_CHECKING:  # these route modules read the state through this one
    from ..embeddings import EmbeddingModel
    from .embeddings import EmbeddingModels
    from .kobold import Generations
    from .metrics import Metrics

logger = logging.getLogger(__name__)
T = TypeVar("T")


class AppState(State):
    """What the app keeps between requests. Starlette's ``app.state`` with its attributes declared,
    so the type checker sees every read and write; ``create_app`` installs it. (No defaults here:
    a class attribute would hide the value Starlette's ``State`` stores.)"""

    config: TabbyConfig
    keys: KeyStore
    models: ModelManager  # the one place that changes ``model`` and ``preset``
    responses: ResponseStore
    model: LoadedModel | None
    preset: Preset | None
    prepared: bool  # the configured preset and model are set up (prepare.py)
    embedding: EmbeddingModel | None
    embeddings: EmbeddingModels  # the one place that changes ``embedding``
    metrics: Metrics
    kobold: Generations  # only with the Kobold API on


def app_state(app: Starlette) -> AppState:
    state = app.state
    assert isinstance(state, AppState), "create_app() installs an AppState"
    return state


def current_state(request: Request) -> AppState:
    return app_state(request.app)


def current_model(request: Request) -> LoadedModel | None:
    """The loaded model, or None (health and listing routes answer without one)."""
    return current_state(request).model


CurrentModel = Annotated[LoadedModel | None, Depends(current_model)]


def require_api(request: Request) -> Permission:
    """Dependency for routes that need an API (or admin) key."""
    return current_state(request).keys.check_api(request.headers)


def require_admin(request: Request) -> Permission:
    """Dependency for routes that need the admin key."""
    return current_state(request).keys.check_admin(request.headers)


ApiPermission = Annotated[str, Depends(require_api)]


async def serving(app: Starlette, requested: str | None, permission: str) -> LoadedModel:
    """The model that answers a request.

    Like upstream, a ``model`` naming something else is ignored (clients send aliases), unless
    inline loading is on: then an admin key loads that folder first, and an API key gets 401.
    Dummy model names are always served by the loaded model. With ``model.models``, the model
    manager picks (and loads) the served model the request names.
    """
    state = app_state(app)
    config = state.config
    if config.model.models:
        return await state.models.serve(requested)
    model = state.model
    if requested and config.model.inline_model_loading and requested not in config.model.dummy_model_names \
            and (model is None or requested != model.name):
        if permission != "admin":  # before looking: an API key learns nothing about which folders exist
            raise unauthorized(f"Loading '{requested[:200]}' on request needs the admin key.")
        model_folder(config, requested, param="model")
        await state.models.load(requested, request={})
        model = state.model
    if model is None:
        raise unavailable("No models are currently loaded. Set model.model_name in config.yml, or load one "
                          "with POST /v1/model/load.")
    return model


async def read_body(request: Request) -> bytes:
    """The body, refused with 413 as soon as it exceeds ``network.max_request_bytes``."""
    limit = current_state(request).config.network.max_request_bytes
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


async def read_json(request: Request, model: type[Body]) -> Body:
    """The body as the given model, within the size and nesting limits of ``network``."""
    return parse_body(await read_body(request), model, current_state(request).config.network.max_json_depth)


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
