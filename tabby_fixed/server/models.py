"""Loading, switching and unloading models, one load at a time.

Model names are folder names inside ``model.model_dir``; anything that resolves elsewhere
(``..``, an absolute path, a symlink pointing out) is refused. Loads are serialised by one lock.
A request holds the ``LoadedModel`` it started with, so a swap never changes a model under a
running request; unloading ends the old engine's jobs.

With ``model.models`` the server serves several folders: a request's ``model`` picks one, which
loads on first use; at most ``max_loaded_models`` stay loaded (the least recently used idle one
makes room), and ``idle_unload_seconds`` unloads those nobody uses. A model counts as busy while
it has jobs, and for a few seconds after it was handed to a request that has not started its
job yet, so it is never unloaded between a request's choice of it and its first token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ..chat import ChatModel
from ..config import ConfigError, ServedModel, TabbyConfig, load_settings, model_overlay
from ..engine.base import Engine, EngineUnavailable
from ..engine.loader import context_length, open_engine
from ..engine.observed import JobObserver, ObservedEngine
from ..errors import ApiError, not_found, unavailable
from ..names import plain_name
from ..sampling import Preset, load_preset, preset_dirs, read_model_card
from ..toolcalls import FORMATS, detect_format, reasoning_tags

logger = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
#: Seconds a model handed to a request stays busy while that request has not started a job.
CLAIM_SECONDS = 10.0
#: Seconds a request waits for a loaded model to go idle when all slots are busy.
ROOM_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class LoadedModel:
    engine: ObservedEngine
    chat: ChatModel
    folder: Path
    card: dict[str, Any]  # the model card's sampler values, when model_card_defaults is on
    preset: Preset | None = None  # with model.models: this model's own preset, over the server's

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


#: Upstream's switches for the formats whose whole answer is channelled messages.
_MESSAGE_FORMATS = {"harmony": "harmony", "muse_glimmer": "muse_glimmer"}


def _tool_format(configured: str | None, engine: Engine, switches: dict[str, bool | None]) -> str | None:
    """The configured format, else the model folder's, else the one its chat template teaches.

    ``harmony: true`` / ``muse_glimmer: true`` select that format over the others, as upstream;
    ``false`` turns it off even where it is configured or detected."""
    chosen = [name for key, name in _MESSAGE_FORMATS.items() if switches.get(key)]
    name = chosen[0] if chosen else configured or engine.info.tool_format
    if chosen and configured and FORMATS.get(configured) is not FORMATS[name]:
        logger.warning("%s: true overrides tool_format %r", chosen[0], configured)
    if name is not None and name not in FORMATS:
        logger.warning("tool_format %r is not a known format (known: %s); tool calls will stay in content",
                       name, ", ".join(sorted(FORMATS)))
        return None
    how = "configured"
    if name is None:
        name = detect_format(engine.info.chat_template)
        how = f"detected from the chat template {engine.info.chat_template_name}"
    for key, off in _MESSAGE_FORMATS.items():
        if switches.get(key) is False and name is not None and FORMATS[name] is FORMATS[off]:
            logger.warning("tool format %s (%s) is off because %s is false: calls and reasoning stay in content",
                           name, how, key)
            return None
    logger.info("tool format: %s (%s)", name, how)
    return name


def open_model(config: TabbyConfig, folder: Path, observer: JobObserver, request: dict[str, Any] | None = None,
               progress: Progress | None = None) -> LoadedModel:
    """Open a model folder with the config's settings, the request's and the folder's overlay (blocking).
    Its jobs are reported to ``observer``."""
    settings, draft = load_settings(config, folder, request)
    draft = draft.model_copy(update={"draft_model_dir": str(config.resolve(draft.draft_model_dir))})
    try:
        engine = ObservedEngine(open_engine(folder, settings, draft, config.memory,
                                            templates_dir=config.resolve("templates"), progress=progress), observer)
    except (EngineUnavailable, ValueError) as error:
        raise ApiError(400, f"Could not load {folder.name}: {error}", code="model_load_failed") from error
    info = engine.info
    tool_format = _tool_format(settings.tool_format, engine,
                               {"harmony": settings.harmony, "muse_glimmer": settings.muse_glimmer})
    start_tag, end_tag = settings.reasoning_start_token, settings.reasoning_end_token
    family_tags = reasoning_tags(tool_format, info.chat_template)
    if family_tags and (start_tag, end_tag) == ("<think>", "</think>"):  # not configured: the family's own
        start_tag, end_tag = family_tags
        logger.info("reasoning tags: %s %s (the %s family's)", start_tag, end_tag, tool_format)
    chat = ChatModel(
        name=info.name, chat_template=info.chat_template, chat_template_name=info.chat_template_name,
        tool_format=tool_format,
        reasoning=settings.reasoning or info.reasoning, reasoning_start=start_tag,
        reasoning_end=end_tag, start_in_reasoning=settings.start_in_reasoning,
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


def idle_model_keys(config: TabbyConfig) -> list[str]:
    """The several-models keys this config sets to no effect, to name at start-up: the bound and
    the idle time without ``model.models``, inline loading with it (the list decides)."""
    model = config.model
    if model.models:
        return ["model.inline_model_loading (model.models decides what loads)"] if model.inline_model_loading else []
    return [f"model.{key} (only with model.models)" for key, default in (("max_loaded_models", 1),
                                                                        ("idle_unload_seconds", 0))
            if getattr(model, key) != default]


class ModelManager:
    """The one place that changes ``app.state.model`` (and the preset a model folder names).

    With ``model.models`` it also holds the loaded ones; ``app.state.model`` is then the one
    used last, the default for requests that name no served model.
    """

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._lock = asyncio.Lock()
        self._pool: dict[str, LoadedModel] = {}  # with model.models: loaded, least recently used first
        self._claimed: dict[str, float] = {}  # with model.models: when each was last handed to a request

    @property
    def config(self) -> TabbyConfig:
        return self._app.state.config

    @property
    def served(self) -> dict[str, ServedModel]:
        """``model.models`` by name; empty for a single-model server."""
        return {entry.name: entry for entry in self.config.model.models}

    @property
    def max_loaded(self) -> int:
        return self.config.model.max_loaded_models if self.served else 1

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
        if self.served:
            await self.acquire(name, progress)
            return
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
            self._app.state.model = await self._open(self.config, folder, request, progress)
            preset = model_overlay(folder).get("sampling", {}).get("override_preset")
            if preset:
                try:
                    self.select_preset(preset)
                except ApiError as error:
                    logger.warning("%s names a sampler preset that cannot be used: %s", name, error.message)

    async def _open(self, config: TabbyConfig, folder: Path, request: dict[str, Any] | None,
                    progress: Progress | None) -> LoadedModel:
        started = time.perf_counter()
        loaded = await asyncio.to_thread(open_model, config, folder, self._app.state.metrics, request, progress)
        self._app.state.metrics.model_loaded(loaded.name, time.perf_counter() - started)
        return loaded

    def loaded(self) -> list[ObservedEngine]:
        """The engines in memory now."""
        if self.served:
            return [model.engine for model in self._pool.values()]
        model: LoadedModel | None = self._app.state.model
        return [model.engine] if model is not None else []

    def context_lengths(self) -> dict[str, int | None]:
        """Each served model's context: the loaded one's, else what its files and settings give."""
        lengths: dict[str, int | None] = {}
        for name, entry in self.served.items():
            model = self._pool.get(name)
            if model is not None:
                lengths[name] = model.engine.info.max_seq_len
                continue
            try:
                folder = model_folder(self.config, name)
                lengths[name] = context_length(folder, load_settings(self._entry_config(entry), folder)[0])
            except (ApiError, ValueError, OSError) as error:
                logger.warning("cannot tell %s's context length: %s", name, error)
                lengths[name] = None
        return lengths

    # -- several models -----------------------------------------------------------------------

    async def serve(self, requested: str | None) -> LoadedModel:
        """The served model a request names; one that names none of them (clients send aliases)
        gets the model used last, or the first listed."""
        if requested not in self.served:
            current: LoadedModel | None = self._app.state.model
            requested = current.name if current is not None else next(iter(self.served))
        return await self.acquire(requested)

    async def acquire(self, name: str, progress: Progress | None = None) -> LoadedModel:
        """The served model ``name``, loaded first when it is not (after making room)."""
        entry = self.served.get(name)
        if entry is None:
            raise not_found(f"The model '{name}' is not one this server serves; model.models lists "
                            f"{', '.join(self.served)}.", param="model_name")
        model = self._pool.get(name)
        if model is None:
            async with self._lock:
                model = self._pool.get(name)
                if model is None:
                    await self._make_room()
                    model = await self._open_entry(entry, progress)
                    self._pool[name] = model
        elif progress:
            progress(1, 1)
        self._pool[name] = self._pool.pop(name)  # now the most recently used
        self._claimed[name] = time.monotonic()
        self._app.state.model = model
        return model

    def _entry_config(self, entry: ServedModel) -> TabbyConfig:
        if entry.prompt_template is None:
            return self.config
        return self.config.model_copy(update={"model": self.config.model.model_copy(
            update={"prompt_template": entry.prompt_template})})

    async def _open_entry(self, entry: ServedModel, progress: Progress | None) -> LoadedModel:
        folder = model_folder(self.config, entry.name, param="model")
        preset_name = entry.override_preset or model_overlay(folder).get("sampling", {}).get("override_preset")
        preset = load_preset(preset_name, preset_dirs(self.config.config_dir)) if preset_name else None
        model = await self._open(self._entry_config(entry), folder, None, progress)
        return dataclasses.replace(model, preset=preset)

    def _idle_since(self, model: LoadedModel) -> float | None:
        """When the model went idle (monotonic seconds); None while it is busy."""
        engine = model.engine
        if engine.waiting or engine.running or engine.active_jobs():
            return None
        claimed = self._claimed.get(model.name, 0.0)
        if engine.last_active < claimed and time.monotonic() - claimed < CLAIM_SECONDS:
            return None  # handed to a request that has not started its job yet
        return max(engine.last_active, claimed)

    async def _make_room(self) -> None:
        """Unload the least recently used idle model until one more fits; waits a while for one to
        go idle, then refuses with 503 rather than cut a running job short."""
        deadline = time.monotonic() + ROOM_WAIT_SECONDS
        while len(self._pool) >= self.config.model.max_loaded_models:
            idle = [model for model in self._pool.values() if self._idle_since(model) is not None]
            if idle:
                await self._drop(idle[0], "to make room")
            elif time.monotonic() > deadline:
                raise unavailable(f"All {len(self._pool)} loaded models are busy (model.max_loaded_models is "
                                  f"{self.config.model.max_loaded_models}); try again when a request ends.")
            else:
                await asyncio.sleep(0.05)

    async def unload_idle(self) -> None:
        """Unload every served model idle for ``idle_unload_seconds``."""
        limit = self.config.model.idle_unload_seconds
        async with self._lock:
            for model in list(self._pool.values()):
                since = self._idle_since(model)
                if since is not None and time.monotonic() - since >= limit:
                    await self._drop(model, f"after {limit:g} s idle")

    async def watch_idle(self) -> None:
        """``unload_idle`` a few times per ``idle_unload_seconds``, for the server's lifetime."""
        limit = self.config.model.idle_unload_seconds
        while True:
            await asyncio.sleep(min(limit / 4, 5.0))
            await self.unload_idle()

    async def _drop(self, model: LoadedModel, why: str) -> None:
        del self._pool[model.name]
        current: LoadedModel | None = self._app.state.model
        if current is not None and current.name == model.name:
            self._app.state.model = next(reversed(self._pool.values()), None)
        await model.engine.unload()
        logger.info("unloaded %s %s", model.name, why)

    # -- unloading ------------------------------------------------------------------------------

    async def unload(self) -> None:
        async with self._lock:
            for model in list(self._pool.values()):
                await self._drop(model, "on request")
            current: LoadedModel | None = self._app.state.model
            if current is not None:
                await self._unload(current)

    async def _unload(self, model: LoadedModel) -> None:
        self._app.state.model = None
        await model.engine.unload()
        logger.info("unloaded %s", model.name)
