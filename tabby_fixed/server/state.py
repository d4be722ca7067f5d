"""What the routes share: the loaded model, and reading a request body within its size limit."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from ..chat import ChatModel
from ..config import TabbyConfig, load_settings
from ..engine.base import Engine
from ..engine.loader import open_engine
from ..errors import ApiError, not_found, unavailable
from ..toolcalls import FORMATS, detect_format

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedModel:
    engine: Engine
    chat: ChatModel
    folder: Path

    @property
    def name(self) -> str:
        return self.engine.info.name


def _tool_format(configured: str | None, engine: Engine) -> str | None:
    """The configured format, else the model folder's, else the one its chat template teaches."""
    name = configured or engine.info.tool_format
    if name is not None and name not in FORMATS:
        logger.warning("tool_format %r is not a known format (known: %s); tool calls will stay in content",
                       name, ", ".join(sorted(FORMATS)))
        return None
    if name is not None:
        logger.info("tool format: %s (configured)", name)
        return name
    detected = detect_format(engine.info.chat_template)
    logger.info("tool format: %s (detected from the chat template %s)", detected, engine.info.chat_template_name)
    return detected


def load_model(config: TabbyConfig, name: str, request: dict[str, Any] | None = None) -> LoadedModel:
    """Open ``model_dir/name`` with the config's settings, the request's and the folder's overlay."""
    folder = config.resolve(config.model.model_dir) / name
    settings, _draft = load_settings(config, folder, request)
    engine = open_engine(folder, settings.engine, max_seq_len=settings.max_seq_len,
                         prompt_template=settings.prompt_template, templates_dir=config.resolve("templates"))
    info = engine.info
    chat = ChatModel(
        name=info.name, chat_template=info.chat_template, tool_format=_tool_format(settings.tool_format, engine),
        reasoning=settings.reasoning or info.reasoning, reasoning_start=settings.reasoning_start_token,
        reasoning_end=settings.reasoning_end_token, start_in_reasoning=settings.start_in_reasoning,
        tool_calls_in_reasoning=settings.tool_calls_in_reasoning,
        template_vars_default=settings.template_vars_default,
        template_vars_force={**({"enable_thinking": True} if settings.force_enable_thinking else {}),
                             **settings.template_vars_force},
        bos_token=info.bos_token, eos_token=info.eos_token)
    logger.info("loaded %s (%s engine, context %d)", info.name, type(engine).__name__, info.max_seq_len)
    return LoadedModel(engine, chat, folder)


def serving(app: FastAPI, requested: str | None) -> LoadedModel:
    """The model that answers a request.

    Like upstream, a ``model`` field naming something else is ignored (clients send aliases),
    unless inline loading is on: then it must name a folder in ``model_dir``.
    """
    model: LoadedModel | None = app.state.model
    config: TabbyConfig = app.state.config
    if model is None:
        raise unavailable("No models are currently loaded. Set model.model_name in config.yml, or load one "
                          "with POST /v1/model/load.")
    if requested and requested != model.name and config.model.inline_model_loading \
            and requested not in config.model.dummy_model_names:
        model_dir = config.resolve(config.model.model_dir).resolve()
        folder = (model_dir / requested).resolve()
        if folder.parent != model_dir or not folder.is_dir():
            raise not_found(f"The model '{requested}' does not exist in {config.model.model_dir}; the loaded model "
                            f"is '{model.name}'.", param="model")
        raise ApiError(400, f"Switching to '{requested}' by request is not supported yet; the loaded model is "
                            f"'{model.name}'.", param="model", code="model_not_loaded")
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
