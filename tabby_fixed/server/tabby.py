"""TabbyAPI's utility routes: health, models, permissions, tokens, service info, props."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from .. import __version__
from ..chat import in_call_order
from ..errors import ApiError
from ..templating import ChatTemplateError, render_chat
from .models import LoadedModel
from .requests import DecodeRequest, EncodeRequest
from .state import ApiPermission, CurrentModel, read_json, serving

router = APIRouter(tags=["tabby"])


@router.get("/health")
async def health(model: CurrentModel) -> JSONResponse:
    issues = model.engine.health_issues() if model else []
    if issues:
        return JSONResponse({"status": "unhealthy", "issues": issues}, status_code=503)
    return JSONResponse({"status": "healthy", "issues": []})


@router.get("/.well-known/serviceinfo")
async def service_info(request: Request) -> dict[str, Any]:
    servers = request.app.state.config.network.api_servers
    apis = {"openai": {"name": "OpenAI API", "relative_url": "/v1", "version": 1}} if "OAI" in servers else {}
    if "KOBOLD" in servers:
        apis["koboldai"] = {"name": "KoboldAI API", "relative_url": "/api", "version": 1}
    return {"version": 0.1, "software": {"name": "tabby-fixed", "version": __version__}, "api": apis}


def _card(name: str, model: LoadedModel | None = None) -> dict[str, Any]:
    card: dict[str, Any] = {"id": name, "object": "model", "created": int(time.time()), "owned_by": "tabbyAPI",
                            "logging": None, "parameters": None}
    if model is not None:
        info = model.engine.info
        card["parameters"] = {
            "max_seq_len": info.max_seq_len, "cache_size": info.cache_size or info.max_seq_len,
            "cache_mode": info.cache_mode, "rope_scale": 1.0, "rope_alpha": 1.0, "max_batch_size": info.max_batch_size,
            "chunk_size": None, "prompt_template": model.chat.chat_template_name,
            "prompt_template_content": model.chat.chat_template, "use_vision": info.vision, "draft": None,
            "tool_format": model.chat.tool_format, "reasoning": model.chat.reasoning}
    return card


@router.get("/v1/models")
@router.get("/v1/model/list")
async def list_models(request: Request, permission: ApiPermission) -> dict[str, Any]:
    """Admin keys see every model folder; API keys see the loaded model, as upstream. A server
    with ``model.models`` lists those, loaded or not, with each one's context length."""
    config = request.app.state.config
    if config.model.models:
        return {"object": "list", "data": _served_cards(request)}
    model: LoadedModel | None = request.app.state.model
    names: list[str] = []
    if config.model.use_dummy_models:
        names += config.model.dummy_model_names
    if permission == "admin":
        model_dir = config.resolve(config.model.model_dir)
        draft_dir = config.resolve(config.draft_model.draft_model_dir)
        if model_dir.is_dir():
            names += sorted(p.name for p in model_dir.iterdir() if p.is_dir() and p.resolve() != draft_dir.resolve())
    elif model is not None:
        names.append(model.name)
    return {"object": "list", "data": [_card(name) for name in names]}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(request: Request, permission: ApiPermission, model_id: str) -> dict[str, Any]:
    """One model's card (``openai.models.retrieve``): any name the same key would see in the list."""
    model: LoadedModel | None = request.app.state.model
    if model is not None and model_id == model.name:
        return _card(model.name, model)
    listed = await list_models(request, permission)
    if any(card["id"] == model_id for card in listed["data"]):
        return _card(model_id)
    raise ApiError(404, f"The model '{model_id}' does not exist, or this key may not see it.", param="model",
                   code="model_not_found")


def _served_cards(request: Request) -> list[dict[str, Any]]:
    """``max_model_len`` (vLLM's name, which clients read for the context) on every served model;
    the loaded ones' cards also carry their parameters."""
    manager = request.app.state.models
    loaded = {engine.info.name for engine in manager.loaded()}
    cards = []
    for name, length in manager.context_lengths().items():
        card = _card(name)
        card.update(max_model_len=length, loaded=name in loaded)
        cards.append(card)
    return cards


@router.get("/v1/model")
async def current_model(request: Request, permission: ApiPermission) -> dict[str, Any]:
    model = await serving(request.app, None, permission)
    return _card(model.name, model)


@router.get("/v1/auth/permission")
async def permission(permission: ApiPermission) -> dict[str, str]:
    return {"permission": permission}


@router.get("/props")
async def props(request: Request, permission: ApiPermission) -> dict[str, Any]:
    model = await serving(request.app, None, permission)
    info = model.engine.info
    return {"total_slots": info.max_batch_size, "chat_template": model.chat.chat_template or "",
            "default_generation_settings": {"n_ctx": info.max_seq_len}}


@router.post("/v1/token/encode")
async def encode(request: Request, permission: ApiPermission) -> dict[str, Any]:
    body: EncodeRequest = await read_json(request, EncodeRequest)
    model = await serving(request.app, None, permission)
    text = body.text
    if not isinstance(text, str):
        if not model.chat.chat_template:
            raise ApiError(422, "This model has no chat template to render messages with.", code="no_chat_template")
        try:
            messages = in_call_order([message.for_template() for message in text])
            text = render_chat(model.chat.chat_template, messages, add_generation_prompt=False, **body.template_vars)
        except ChatTemplateError as error:
            raise ApiError(400, f"The chat template could not render these messages: {error}") from error
    # Off the event loop: a text up to the body limit takes a while to tokenize.
    tokens = await asyncio.to_thread(model.engine.encode, text, add_bos=body.add_bos_token,
                                     special_tokens=body.encode_special_tokens)
    return {"tokens": tokens, "length": len(tokens)}


@router.post("/v1/token/decode")
async def decode(request: Request, permission: ApiPermission) -> dict[str, str]:
    body: DecodeRequest = await read_json(request, DecodeRequest)
    model = await serving(request.app, None, permission)
    return {"text": await asyncio.to_thread(model.engine.decode, body.tokens,
                                            special_tokens=body.decode_special_tokens)}
