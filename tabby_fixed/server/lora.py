"""TabbyAPI's LoRA routes, answered as upstream answers them on ExLlamaV3: no engine here can
apply a LoRA, so none is ever active and every load fails, by name, with a message that says why.

The routes exist so that operator scripts and front-ends written against upstream get that
answer instead of a 404; ``lora.loras`` in the config is refused the same way at start-up.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from ..auth import ApiPermission, require_admin
from ..config import TabbyConfig
from ..errors import ApiError
from .requests import RequestBody
from .state import read_json, serving

router = APIRouter(prefix="/v1", tags=["lora"])
logger = logging.getLogger(__name__)

UNSUPPORTED = "ExLlamaV3 cannot load LoRAs (neither can the scripted engine); merge the LoRA into the model instead."


class LoraName(RequestBody):
    name: str
    scaling: float = Field(1.0, ge=0)


class LoraLoad(RequestBody):
    loras: list[LoraName] = Field(default_factory=list)
    skip_queue: bool = False


def _cards(names: list[str]) -> dict[str, Any]:
    created = int(time.time())
    return {"object": "list", "data": [{"id": name, "object": "lora", "created": created, "owned_by": "tabbyAPI",
                                        "scaling": None} for name in names]}


@router.get("/loras")
@router.get("/lora/list")
async def list_loras(request: Request, permission: ApiPermission) -> dict[str, Any]:
    """Admin keys see every folder in ``lora_dir``; API keys the active LoRAs (never any), as upstream."""
    config: TabbyConfig = request.app.state.config
    folder = config.resolve(config.lora.lora_dir)
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if permission == "admin" and folder.is_dir() \
        else []
    return _cards(names)


@router.get("/lora")
async def active_loras(request: Request, permission: ApiPermission) -> dict[str, Any]:
    await serving(request.app, None, permission)
    return _cards([])


@router.post("/lora/load", dependencies=[Depends(require_admin)])
async def load_loras(request: Request) -> dict[str, Any]:
    """Upstream's answer on ExLlamaV3: every named LoRA under ``failure``; ``message`` says why."""
    body: LoraLoad = await read_json(request, LoraLoad)
    await serving(request.app, None, "admin")
    if not body.loras:
        raise ApiError(400, "Name the LoRAs to load: {\"loras\": [{\"name\": FOLDER, \"scaling\": 1.0}]}.",
                       param="loras")
    config: TabbyConfig = request.app.state.config
    folder = config.resolve(config.lora.lora_dir)
    if not folder.is_dir():
        raise ApiError(400, f"The LoRA folder {folder} (lora.lora_dir) does not exist.", param="loras")
    names = [lora.name for lora in body.loras]
    logger.warning("LoRA load of %s refused: %s", ", ".join(names), UNSUPPORTED)
    return {"success": [], "failure": names, "message": UNSUPPORTED}


@router.post("/lora/unload", dependencies=[Depends(require_admin)])
async def unload_loras(request: Request) -> JSONResponse:
    """Nothing is loaded, so nothing to do; 200 with a null body, as upstream."""
    await serving(request.app, None, "admin")
    return JSONResponse(None)
