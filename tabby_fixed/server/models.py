"""Loading, switching and unloading the model, one at a time.

Model names are folder names inside ``model.model_dir``; anything that resolves elsewhere
(``..``, an absolute path, a symlink pointing out) is refused. Loads are serialised by one lock.
A request holds the ``LoadedModel`` it started with, so a swap never changes a model under a
running request; unloading ends the old engine's jobs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ..chat import ChatModel
from ..config import ConfigError, TabbyConfig, load_settings, model_overlay
from ..engine.base import Engine, EngineUnavailable
from ..engine.loader import open_engine
from ..errors import ApiError, not_found
from ..names import plain_name
from ..sampling import Preset, load_preset, preset_dirs, read_model_card
from ..toolcalls import FORMATS, detect_format

logger = logging.getLogger(__name__)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class LoadedModel:
    engine: Engine
    chat: ChatModel
    folder: Path
    card: dict[str, Any]  # the model card's sampler values, when model_card_defaults is on

    @property
    def name(self) -> str:
        return self.engine.info.name


def model_folder(config: TabbyConfig, name: str, base: str | None = None, param: str = "model_name") -> Path:
    """``base/name`` (base: model_dir), refused unless it is a folder directly inside base.

    The error names neither the folder's absolute path nor why the name failed (missing, outside,
    unreadable, too long), so it tells a client nothing about the server's disk.
    """
    root = config.resolve(base or config.model.model_dir).resolve()
    try:
        folder = (root / name).resolve() if name and "\x00" not in name else root
        found = folder.parent == root and folder.is_dir()
    except (OSError, ValueError):  # a name too long for the file system, say
        found = False
    if not found:
        where = "draft_model_dir" if base else "model_dir"
        raise not_found(f"The model '{name[:200]}' does not exist; model names are folder names in {where}.",
                        param=param)
    return folder


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


def open_model(config: TabbyConfig, folder: Path, request: dict[str, Any] | None = None,
               progress: Progress | None = None) -> LoadedModel:
    """Open a model folder with the config's settings, the request's and the folder's overlay (blocking)."""
    settings, draft = load_settings(config, folder, request)
    draft = draft.model_copy(update={"draft_model_dir": str(config.resolve(draft.draft_model_dir))})
    try:
        engine = open_engine(folder, settings, draft, config.memory, templates_dir=config.resolve("templates"),
                             progress=progress)
    except (EngineUnavailable, ValueError) as error:
        raise ApiError(400, f"Could not load {folder.name}: {error}", code="model_load_failed") from error
    info = engine.info
    chat = ChatModel(
        name=info.name, chat_template=info.chat_template, chat_template_name=info.chat_template_name,
        tool_format=_tool_format(settings.tool_format, engine),
        reasoning=settings.reasoning or info.reasoning, reasoning_start=settings.reasoning_start_token,
        reasoning_end=settings.reasoning_end_token, start_in_reasoning=settings.start_in_reasoning,
        tool_calls_in_reasoning=settings.tool_calls_in_reasoning,
        template_vars_default=settings.template_vars_default,
        template_vars_force={**({"enable_thinking": True} if settings.force_enable_thinking else {}),
                             **settings.template_vars_force},
        bos_token=info.bos_token, eos_token=info.eos_token, pad_token=info.pad_token, unk_token=info.unk_token,
        reasoning_budget_tokens=settings.reasoning_budget_tokens,
        reasoning_budget_message=settings.reasoning_budget_message)
    card = read_model_card(folder) if config.sampling.model_card_defaults else {}
    logger.info("loaded %s (%s engine, context %d, model card samplers: %s)", info.name, type(engine).__name__,
                info.max_seq_len, card or "none")
    return LoadedModel(engine, chat, folder, card)


class ModelManager:
    """The one place that changes ``app.state.model`` (and the preset a model folder names)."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._lock = asyncio.Lock()

    @property
    def config(self) -> TabbyConfig:
        return self._app.state.config

    def select_preset(self, name: str | None) -> Preset | None:
        """Make a preset active (None: none); raises ApiError when it is missing or invalid."""
        preset = load_preset(name, preset_dirs(self.config.config_dir)) if name else None
        self._app.state.preset = preset
        return preset

    def check_settings(self, folder: Path, request: dict[str, Any] | None) -> None:
        """Refuse a load whose settings cannot work with a 400, before anything is unloaded."""
        try:
            load_settings(self.config, folder, request)
        except ConfigError as error:
            raise ApiError(400, f"Could not load {folder.name}: {error}", code="model_load_failed") from None
        if request and request.get("prompt_template") is not None:
            plain_name(request["prompt_template"], "prompt_template")  # a file in templates/, never a path
        draft = (request or {}).get("draft_model")
        if isinstance(draft, dict) and draft.get("draft_model_name") is not None:
            model_folder(self.config, str(draft["draft_model_name"]), self.config.draft_model.draft_model_dir,
                         param="draft_model.draft_model_name")

    async def load(self, name: str, request: dict[str, Any] | None = None, progress: Progress | None = None) -> None:
        folder = model_folder(self.config, name)
        self.check_settings(folder, request)
        async with self._lock:
            current: LoadedModel | None = self._app.state.model
            if current is not None and current.folder == folder:
                if progress:
                    progress(1, 1)
                return
            if current is not None:
                await self._unload(current)
            loaded = await asyncio.to_thread(open_model, self.config, folder, request, progress)
            self._app.state.model = loaded
            preset = model_overlay(folder).get("sampling", {}).get("override_preset")
            if preset:
                try:
                    self.select_preset(preset)
                except ApiError as error:
                    logger.warning("%s names a sampler preset that cannot be used: %s", name, error.message)

    async def unload(self) -> None:
        async with self._lock:
            current: LoadedModel | None = self._app.state.model
            if current is not None:
                await self._unload(current)

    async def _unload(self, model: LoadedModel) -> None:
        self._app.state.model = None
        await model.engine.unload()
        logger.info("unloaded %s", model.name)
