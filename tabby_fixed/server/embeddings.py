"""The embedding routes: ``POST /v1/embeddings`` (OpenAI's shape, as LangChain, LlamaIndex and
Open WebUI call it) and upstream's ``/v1/model/embedding`` routes to list, load and unload the
embedding model, which lives beside the generation model and is loaded on its own.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import time
from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import AliasChoices, Field

from ..auth import ApiPermission, require_admin
from ..config import TabbyConfig
from ..embeddings import EmbeddingError, EmbeddingModel
from ..errors import ApiError, unavailable
from .models import model_folder
from .requests import RequestBody
from .state import read_json

router = APIRouter(prefix="/v1", tags=["embeddings"])  # served always, as upstream's core routes
oai_router = APIRouter(prefix="/v1", tags=["embeddings"])  # with the OAI API server
ADMIN = [Depends(require_admin)]


class EmbeddingsRequest(RequestBody):
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    model: str | None = None  # ignored, as upstream: the loaded embedding model answers


class EmbeddingLoad(RequestBody):
    embedding_model_name: str | None = Field(None, validation_alias=AliasChoices("embedding_model_name", "name"))
    embeddings_device: Literal["cpu", "auto", "cuda"] | None = None


class EmbeddingModels:
    """The one place that changes ``app.state.embedding``; loads are one at a time."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._lock = asyncio.Lock()

    async def load(self, name: str, device: str | None = None) -> EmbeddingModel:
        config: TabbyConfig = self._app.state.config
        folder = model_folder(config, name, config.embeddings.embedding_model_dir, param="embedding_model_name")
        async with self._lock:
            try:
                loaded = await asyncio.to_thread(EmbeddingModel, folder,
                                                 device or config.embeddings.embeddings_device)
            except EmbeddingError as error:  # the model in use stays
                raise ApiError(400, str(error), code="model_load_failed", param="embedding_model_name") from error
            current: EmbeddingModel | None = self._app.state.embedding
            self._app.state.embedding = loaded
            if current is not None:  # embedding models are small: the old one goes once the new one is in
                await asyncio.to_thread(current.unload)
            return loaded

    async def unload(self) -> None:
        async with self._lock:
            current: EmbeddingModel | None = self._app.state.embedding
            self._app.state.embedding = None
            if current is not None:
                await asyncio.to_thread(current.unload)


def _loaded(request: Request) -> EmbeddingModel:
    model: EmbeddingModel | None = request.app.state.embedding
    if model is None:
        raise unavailable("No embedding models are currently loaded. Set embeddings.embedding_model_name in "
                          "config.yml, or load one with POST /v1/model/embedding/load.")
    return model


def _card(name: str, model: EmbeddingModel | None = None) -> dict[str, Any]:
    card: dict[str, Any] = {"id": name, "object": "model", "created": int(time.time()), "owned_by": "tabbyAPI"}
    if model is not None:
        card["parameters"] = {"dimensions": model.dimensions, "max_seq_len": model.max_tokens,
                              "pooling": model.pooling, "device": model.device}
    return card


def _texts(body: EmbeddingsRequest) -> list[str]:
    inputs = [body.input] if isinstance(body.input, str) else body.input
    if not inputs:
        raise ApiError(400, "input is empty: send a string or a list of strings.", param="input")
    if not all(isinstance(text, str) for text in inputs):
        raise ApiError(400, "Token-id inputs cannot be embedded here: their ids are another tokenizer's. Send "
                            "text (LangChain's OpenAIEmbeddings: check_embedding_ctx_length=False).", param="input")
    for index, text in enumerate(inputs):
        if not text:
            raise ApiError(400, f"input[{index}] is an empty string.", param="input")
    return inputs  # type: ignore[return-value]


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    """``base64``: little-endian float32 bytes, what the openai SDK decodes (and asks for by default)."""
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


@oai_router.post("/embeddings")
async def embeddings(request: Request, permission: ApiPermission) -> dict[str, Any]:
    body: EmbeddingsRequest = await read_json(request, EmbeddingsRequest)
    model = _loaded(request)
    texts = _texts(body)
    try:
        result = await asyncio.to_thread(model.embed, texts)
    except EmbeddingError as error:
        raise ApiError(400, str(error), param="input", code="context_length_exceeded") from error
    return {"object": "list", "model": model.name,
            "data": [{"object": "embedding", "index": i, "embedding": _encoded(vector, body.encoding_format)}
                     for i, vector in enumerate(result.vectors)],
            "usage": {"prompt_tokens": result.tokens, "total_tokens": result.tokens}}


@router.get("/model/embedding/list")
async def list_embedding_models(request: Request, permission: ApiPermission) -> dict[str, Any]:
    """Admin keys see every folder in embedding_model_dir; API keys the loaded embedding model, as upstream."""
    config: TabbyConfig = request.app.state.config
    folder = config.resolve(config.embeddings.embedding_model_dir)
    loaded: EmbeddingModel | None = request.app.state.embedding
    if permission == "admin":
        names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    else:
        names = [loaded.name] if loaded else []
    return {"object": "list", "data": [_card(name) for name in names]}


@router.get("/model/embedding")
async def current_embedding_model(request: Request, permission: ApiPermission) -> dict[str, Any]:
    model = _loaded(request)
    return _card(model.name, model)


@router.post("/model/embedding/load", dependencies=ADMIN)
async def load_embedding_model(request: Request) -> dict[str, Any]:
    body: EmbeddingLoad = await read_json(request, EmbeddingLoad)
    if not body.embedding_model_name:
        raise ApiError(400, "An embedding_model_name is required: a folder in embeddings.embedding_model_dir.",
                       param="embedding_model_name")
    await request.app.state.embeddings.load(body.embedding_model_name, body.embeddings_device)
    return {"model_type": "embedding_model", "module": 1, "modules": 1, "status": "finished"}


@router.post("/model/embedding/unload", dependencies=ADMIN)
async def unload_embedding_model(request: Request) -> JSONResponse:
    _loaded(request)
    await request.app.state.embeddings.unload()
    return JSONResponse(None)
