"""TabbyAPI's admin routes: sampler presets, chat templates, model load and unload, downloads.

Paths, key levels and bodies follow upstream (reference/tabbyapi.md §1.3), so its operator
scripts keep working. Where upstream fails badly (a missing template is a 500 there, unloading
a preset keeps its name), these answer with a clear error or the state that results.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import AliasChoices, Field

from ..auth import ApiPermission, require_admin
from ..download import DownloadError, DownloadSpec, download, target_folder
from ..errors import ApiError, not_found
from ..names import plain_name
from ..sampling import Preset, list_presets, parse_overrides, preset_dirs
from ..templating import named_template, template_names
from .models import LoadedModel, model_folder
from .requests import RequestBody
from .sse import frame, sse_response
from .state import read_json, serving

router = APIRouter(tags=["admin"])
logger = logging.getLogger(__name__)
ADMIN = [Depends(require_admin)]


# -- sampler presets ---------------------------------------------------------------------------

class PresetSwitch(RequestBody):
    preset: str | None = None
    overrides: dict[str, Any] | None = None


def _preset_state(request: Request, permission: str) -> dict[str, Any]:
    preset: Preset | None = request.app.state.preset
    presets = list_presets(preset_dirs(request.app.state.config.config_dir)) if permission == "admin" else []
    return {"selected_preset": preset.name if preset else None,
            "overrides": {k: {"override": o.value, "force": o.force, "additive": o.additive}
                          for k, o in (preset.overrides if preset else {}).items()},
            "presets": presets}


@router.get("/v1/sampling/overrides")
@router.get("/v1/sampling/override/list")
async def sampler_overrides(request: Request, permission: ApiPermission) -> dict[str, Any]:
    return _preset_state(request, permission)


@router.post("/v1/sampling/override/switch", dependencies=ADMIN)
async def switch_preset(request: Request) -> dict[str, Any]:
    body: PresetSwitch = await read_json(request, PresetSwitch)
    if body.preset:
        request.app.state.models.select_preset(body.preset)
    elif body.overrides is not None:
        request.app.state.preset = Preset(None, parse_overrides(body.overrides, "overrides"))
    else:
        raise ApiError(400, "Send a preset name ({\"preset\": NAME}) or overrides ({\"overrides\": {...}}).",
                       param="preset")
    return _preset_state(request, "admin")


@router.post("/v1/sampling/override/unload", dependencies=ADMIN)
async def unload_preset(request: Request) -> dict[str, Any]:
    request.app.state.preset = None
    return _preset_state(request, "admin")


# -- chat templates ------------------------------------------------------------------------------

class TemplateSwitch(RequestBody):
    prompt_template_name: str = Field(validation_alias=AliasChoices("prompt_template_name", "name"))


@router.get("/v1/templates")
@router.get("/v1/template/list")
async def templates(request: Request, permission: ApiPermission) -> dict[str, Any]:
    """Admin keys see every ``templates/*.jinja`` and the shipped ones (upstream ships chatml and
    alpaca in its templates/); API keys the template in use, as upstream."""
    if permission == "admin":
        names = template_names(request.app.state.config.resolve("templates"))
    else:
        model: LoadedModel | None = request.app.state.model
        names = [model.chat.chat_template_name] if model and model.chat.chat_template_name else []
    return {"object": "list", "data": names}


@router.post("/v1/template/switch", dependencies=ADMIN)
async def switch_template(request: Request) -> dict[str, Any]:
    body: TemplateSwitch = await read_json(request, TemplateSwitch)
    model = await serving(request.app, None, "admin")
    name = plain_name(body.prompt_template_name, "prompt_template_name")
    found = named_template(name, request.app.state.config.resolve("templates"))
    if found is None:
        raise not_found(f"No template '{name}': there is no {name}.jinja in templates/ or among the shipped ones.",
                        param="prompt_template_name")
    chat = dataclasses.replace(model.chat, chat_template=found[1], chat_template_name=found[0])
    request.app.state.model = dataclasses.replace(model, chat=chat)
    return {"prompt_template": name}


@router.post("/v1/template/unload", dependencies=ADMIN)
async def unload_template(request: Request) -> dict[str, Any]:
    model = await serving(request.app, None, "admin")
    chat = dataclasses.replace(model.chat, chat_template=None, chat_template_name=None)
    request.app.state.model = dataclasses.replace(model, chat=chat)
    return {"prompt_template": None}


# -- models ---------------------------------------------------------------------------------------

class ModelLoad(RequestBody):
    model_name: str | None = Field(None, validation_alias=AliasChoices("model_name", "name"))


@router.post("/v1/model/load", dependencies=ADMIN)
async def load_model(request: Request) -> Response:
    """Load a model folder, reporting progress as SSE events in upstream's shape.

    The load runs detached from the request, so a client that disconnects does not abort it.
    """
    body: ModelLoad = await read_json(request, ModelLoad)
    if not body.model_name:
        raise ApiError(400, "A model_name is required: the name of a folder in model_dir.", param="model_name")
    folder = model_folder(request.app.state.config, body.model_name)
    settings = {k: v for k, v in (body.model_extra or {}).items() if v is not None}
    request.app.state.models.check_settings(folder, settings)  # a 400 now, not an error event after the unload
    events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def progress(module: int, modules: int) -> None:
        for status in ("processing", "finished") if module == modules else ("processing",):
            event = {"model_type": "model", "module": module, "modules": modules, "status": status}
            loop.call_soon_threadsafe(events.put_nowait, event)

    task = asyncio.ensure_future(request.app.state.models.load(body.model_name, settings, progress))
    task.add_done_callback(lambda _: loop.call_soon(events.put_nowait, None))
    return sse_response(_load_events(events, task))


async def _load_events(events: asyncio.Queue[dict[str, Any] | None],
                       task: asyncio.Future[None]) -> AsyncIterator[bytes]:
    while (event := await events.get()) is not None:
        yield frame(event)
    error = task.exception()
    if error is not None:
        failure = error if isinstance(error, ApiError) else ApiError(
            500, f"Loading failed: {type(error).__name__}: {error}", type="server_error")
        yield frame(failure.body())


@router.post("/v1/model/unload", dependencies=ADMIN)
async def unload_model(request: Request) -> JSONResponse:
    if not request.app.state.config.model.models:  # several models: unloading none is no error
        await serving(request.app, None, "admin")
    await request.app.state.models.unload()
    return JSONResponse(None)


@router.get("/v1/model/draft/list")
async def draft_models(request: Request, permission: ApiPermission) -> dict[str, Any]:
    """Admin keys see every folder in draft_model_dir; API keys the draft in use (none yet)."""
    config = request.app.state.config
    folder = config.resolve(config.draft_model.draft_model_dir)
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if permission == "admin" and folder.is_dir() \
        else []
    return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "tabbyAPI"} for name in names]}


# -- downloads ------------------------------------------------------------------------------------

class DownloadRequest(RequestBody):
    repo_id: str
    repo_type: str = "model"
    folder_name: str | None = None
    revision: str | None = None
    token: str | None = None
    include: list[str] = Field(default_factory=lambda: ["*"])
    exclude: list[str] = Field(default_factory=list)
    chunk_limit: int | None = Field(None, gt=0)
    timeout: float | None = Field(None, gt=0)


@router.post("/v1/download", dependencies=ADMIN)
async def download_repo(request: Request) -> dict[str, str]:
    """Download a Hugging Face repository into model_dir (lora_dir for ``repo_type: lora``) and
    answer with its path once every file is there. A client that goes away cancels it, and the
    partial files are removed."""
    body: DownloadRequest = await read_json(request, DownloadRequest)
    config = request.app.state.config
    spec = DownloadSpec(**body.model_dump(exclude=set(body.model_extra or {})))
    target_folder(config, spec)  # a bad name or an existing folder is a 400 before any network
    cancel = threading.Event()
    task = asyncio.ensure_future(asyncio.to_thread(download, config, spec, None, cancel))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.5)
            if not task.done() and await request.is_disconnected():
                cancel.set()
        path = task.result()
    except DownloadError as error:
        raise ApiError(400, str(error), code="download_failed") from error
    finally:
        cancel.set()
    logger.info("downloaded %s to %s", spec.repo_id, path)
    return {"download_path": str(path)}
