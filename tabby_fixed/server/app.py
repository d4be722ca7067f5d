"""``create_app(config)``: the FastAPI application, built by the caller, nothing at import time.

Every error leaves as OpenAI's error body: ``ApiError`` from our code, Starlette's HTTP errors
(unknown route, wrong method) and FastAPI's validation errors are mapped here, and anything
unexpected becomes a 500 whose message names the failure instead of a bare "Internal Server
Error", on a connection that stays usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive, Scope, Send

from .. import __version__
from ..auth import KeyStore
from ..config import TabbyConfig
from ..errors import ApiError
from . import admin, anthropic, apidoc, embeddings, kobold, lora, metrics, openai, responses, tabby
from .asgi import HttpMiddleware
from .metrics import Metrics, RequestCounter
from .models import ModelManager, idle_model_keys
from .prepare import prepare
from .request_log import RequestLog
from .response_store import ResponseStore

logger = logging.getLogger(__name__)


def create_app(config: TabbyConfig) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        watchers = [asyncio.ensure_future(app.state.keys.watch())]
        if config.model.models and config.model.idle_unload_seconds:
            watchers.append(asyncio.ensure_future(app.state.models.watch_idle()))
        await prepare(app)
        if config.embeddings.embedding_model_name:
            await app.state.embeddings.load(config.embeddings.embedding_model_name)
        try:
            yield
        finally:
            for watcher in watchers:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await app.state.models.unload()
            await app.state.embeddings.unload()

    app = FastAPI(title="tabby-fixed", version=__version__, lifespan=lifespan)
    for key in idle_model_keys(config):
        logger.warning("%s has no effect here", key)
    app.state.config = config
    app.state.keys = KeyStore(config.resolve("api_tokens.yml"), disabled=config.network.disable_auth)
    app.state.model = None
    app.state.preset = None
    app.state.models = ModelManager(app)
    app.state.embedding = None
    app.state.embeddings = embeddings.EmbeddingModels(app)
    app.state.metrics = Metrics(app.state.models.loaded, lambda: app.state.models.max_loaded)
    app.state.health_issues = []
    app.state.responses = ResponseStore(config.network.responses_store_size, config.network.responses_store_ttl)
    app.state.prepared = False  # the configured preset and model are set up (startup.prepare)
    app.add_middleware(_Unexpected)
    app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"], allow_headers=["*"],
                       allow_credentials=True)
    if config.logging.log_requests:
        app.add_middleware(RequestLog)
    app.add_middleware(RequestCounter, metrics=app.state.metrics)
    if "OAI" in config.network.api_servers:
        app.include_router(openai.router)
        app.include_router(anthropic.router)
        app.include_router(responses.router)
        app.include_router(embeddings.oai_router)
    if "KOBOLD" in config.network.api_servers:
        app.state.kobold = kobold.Generations()
        app.include_router(kobold.router)
    app.include_router(tabby.router)
    app.include_router(admin.router)
    app.include_router(lora.router)
    app.include_router(embeddings.router)
    app.include_router(metrics.router)
    _add_error_handlers(app)
    apidoc.install(app)
    return app


def _error(error: ApiError, path: str = "") -> JSONResponse:
    """OpenAI's error body, or Anthropic's on the Messages routes (their clients read only that)."""
    body = anthropic.error_body(error) if path.startswith("/v1/messages") else error.body()
    return JSONResponse(body, status_code=error.status)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError) -> JSONResponse:
        return _error(error, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        message = {404: f"There is no route {request.method} {request.url.path}.",
                   405: f"{request.method} is not allowed on {request.url.path}."}.get(error.status_code, error.detail)
        response = _error(ApiError(error.status_code, str(message),
                                   code="not_found" if error.status_code == 404 else None), request.url.path)
        response.headers.update(error.headers or {})  # 405 names the allowed methods in Allow
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        first: dict[str, Any] = error.errors()[0] if error.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(part) for part in first["loc"])
        return _error(ApiError(400, f"Invalid request: {where}: {first['msg']}.", param=where), request.url.path)



class _Unexpected(HttpMiddleware):
    """Any other failure before the response started becomes a 500 with a message.

    A plain ASGI middleware rather than an ``Exception`` handler: Starlette re-raises after such
    a handler, and uvicorn then drops the keep-alive connection the reply went out on.
    """

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as error:
            if started:
                raise
            logger.exception("request failed")
            trace = traceback.format_exc() if scope["app"].state.config.network.send_tracebacks else None
            failure = ApiError(500, f"The server failed: {type(error).__name__}: {error}", type="server_error",
                               trace=trace)
            await _error(failure, scope.get("path", ""))(scope, receive, send)
