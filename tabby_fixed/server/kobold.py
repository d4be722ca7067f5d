"""The KoboldAI API (``network.api_servers: [..., Kobold]``): what KoboldAI Lite and SillyTavern's
KoboldAI mode call, with upstream TabbyAPI's paths and shapes (reference/tabbyapi.md §1.3).

A generation is a text completion of ``prompt`` with Kobold's sampler names. Each one runs under
a ``genkey`` (the client's, or a fresh one) so that ``/api/extra/generate/check`` can read the
text so far and ``/api/extra/abort`` can stop it, from another request. The routes under
``/api/v1`` are served under ``/api/latest`` as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import model_validator

from ..engine.base import Step
from .openai import _Choices, _generation, guarded
from .requests import GenerationFields, RequestBody, parse_body
from .sse import ping, sse_response
from .state import ApiPermission, read_body, read_json, serving

#: How often a running generation looks for an abort while the engine is silent, in seconds.
ABORT_POLL = 0.2

#: What KoboldAI Lite reads to tell a KoboldAI United server from KoboldCpp; upstream's values.
UNITED_VERSION = "1.2.5"
KOBOLDCPP_VERSION = "1.74"


class GenerateRequest(GenerationFields):
    """Kobold's generate body: a prompt and TabbyAPI's sampler fields, with Kobold's own names
    (``max_length``, ``rep_pen``, ``rep_pen_range``, ``stop_sequence``, ...) as aliases."""

    prompt: str
    genkey: str | None = None
    use_default_badwordsids: bool = False
    dynatemp_range: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _kobold_meanings(cls, data: Any) -> Any:
        """Kobold's fields that stand for ours: a range of 0 means the whole context, banning the
        default bad words means banning the end of sequence, and a dynamic-temperature range is
        the span around ``temperature``."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in ("penalty_range", "repetition_range", "repetition_penalty_range", "rep_pen_range"):
            if data.get(name) == 0:
                data[name] = -1
        if data.get("use_default_badwordsids") is True:
            data.setdefault("ban_eos_token", True)
        spread = data.get("dynatemp_range")
        if isinstance(spread, int | float) and not isinstance(spread, bool) and spread > 0:
            temperature = data.get("temperature")
            centre = temperature if isinstance(temperature, int | float) else 1.0
            data.setdefault("min_temp", max(0.0, centre - spread))
            data.setdefault("max_temp", centre + spread)
        return data


class GenkeyRequest(RequestBody):
    genkey: str


class TokenCountRequest(RequestBody):
    prompt: str


@dataclass
class _Generation:
    text: list[str] = field(default_factory=list)
    aborted: bool = False


class Generations:
    """The generations running now, by genkey: what check and abort look up."""

    def __init__(self) -> None:
        self._running: dict[str, _Generation] = {}

    @contextlib.contextmanager
    def running(self, genkey: str) -> Any:
        entry = self._running[genkey] = _Generation()
        try:
            yield entry
        finally:
            if self._running.get(genkey) is entry:  # a later request may have reused the key
                del self._running[genkey]

    def text(self, genkey: str) -> str | None:
        entry = self._running.get(genkey)
        return "".join(entry.text) if entry else None

    def abort(self, genkey: str) -> bool:
        entry = self._running.get(genkey)
        if entry is not None:
            entry.aborted = True
        return entry is not None


router = APIRouter(prefix="/api", tags=["kobold"])
united = APIRouter()  # served under /api/v1 and /api/latest
extra = APIRouter(prefix="/extra")


def _generations(request: Request) -> Generations:
    return request.app.state.kobold


async def _pieces(request: Request, permission: str, body: GenerateRequest) -> AsyncIterator[str | None]:
    """Start the generation (a prompt that does not fit fails here, before any reply), then yield
    its text; None each time ``ABORT_POLL`` seconds pass without any, so a stream can send pings."""
    model = await serving(request.app, None, permission)
    params, _ = _generation(request.app, model, body)
    choices = await _Choices.start(request, model, [body.prompt], params, [body.prompt])
    genkey = body.genkey or f"KCPP{uuid.uuid4().hex[:8]}"

    async def pieces() -> AsyncIterator[str | None]:
        with _generations(request).running(genkey) as entry:
            async with contextlib.aclosing(choices.steps(ABORT_POLL)) as steps:  # closing it ends the job
                async for batch in steps:
                    if entry.aborted:
                        return
                    if batch is None:
                        yield None
                    for _, item in batch or ():
                        if isinstance(item, Step) and item.text:
                            entry.text.append(item.text)
                            yield item.text

    return pieces()


@united.post("/generate")
async def generate(request: Request, permission: ApiPermission) -> dict[str, Any]:
    body: GenerateRequest = await read_json(request, GenerateRequest)
    pieces = await _pieces(request, permission, body)
    async with contextlib.aclosing(pieces):
        text = "".join([piece async for piece in pieces if piece is not None])
    return {"results": [{"text": text}]}


@extra.post("/generate/stream")
async def generate_stream(request: Request, permission: ApiPermission) -> Response:
    """``event: message`` frames carrying ``{"token": text}``, as KoboldCpp streams; no ``[DONE]``."""
    body: GenerateRequest = await read_json(request, GenerateRequest)
    pieces = await _pieces(request, permission, body)
    interval = request.app.state.config.network.sse_ping_interval
    return sse_response(guarded(_token_events(pieces, interval)))


async def _token_events(pieces: AsyncIterator[str | None], ping_interval: float) -> AsyncIterator[bytes]:
    quiet_since = time.monotonic()
    async with contextlib.aclosing(pieces):
        async for piece in pieces:
            if piece is not None:
                quiet_since = time.monotonic()
                yield b"event: message\ndata: " + json.dumps({"token": piece}, ensure_ascii=False).encode() + b"\n\n"
            elif ping_interval and time.monotonic() - quiet_since >= ping_interval:
                quiet_since = time.monotonic()
                yield ping()


@extra.post("/abort")
async def abort(request: Request, permission: ApiPermission) -> dict[str, bool]:
    """Stop the generation running under ``genkey``; its reply ends with the text so far.
    ``success`` is true whether or not one was running, as upstream answers."""
    body: GenkeyRequest = await read_json(request, GenkeyRequest)
    await serving(request.app, None, permission)
    _generations(request).abort(body.genkey)
    return {"success": True}


@extra.get("/generate/check")
@extra.post("/generate/check")
async def check(request: Request, permission: ApiPermission) -> dict[str, Any]:
    """The text a running generation has made so far; no results when none runs under ``genkey``.
    A GET may name the key in its body, as upstream reads it, or as ``?genkey=``."""
    raw = await read_body(request)
    genkey = request.query_params.get("genkey")
    depth = request.app.state.config.network.max_json_depth
    body: GenkeyRequest = parse_body(raw, GenkeyRequest, depth) if raw.strip() or genkey is None \
        else GenkeyRequest(genkey=genkey)
    await serving(request.app, None, permission)
    text = _generations(request).text(body.genkey)
    return {"results": [{"text": text}] if text else []}


@united.get("/model")
async def current_model(request: Request, permission: ApiPermission) -> dict[str, str]:
    model = await serving(request.app, None, permission)
    return {"result": f"tabbyAPI/{model.name}"}


@extra.post("/tokencount")
async def token_count(request: Request, permission: ApiPermission) -> dict[str, Any]:
    body: TokenCountRequest = await read_json(request, TokenCountRequest)
    model = await serving(request.app, None, permission)
    ids = await asyncio.to_thread(model.engine.encode, body.prompt)  # off the event loop
    return {"value": len(ids), "ids": ids}


@united.get("/config/max_length")
@united.get("/config/max_context_length")
@extra.get("/true_max_context_length")
async def max_length(request: Request, permission: ApiPermission) -> dict[str, int]:
    """The model's context length, on all three paths, as upstream answers."""
    model = await serving(request.app, None, permission)
    return {"value": model.engine.info.max_seq_len}


@united.get("/info/version")
async def united_version() -> dict[str, str]:
    return {"result": UNITED_VERSION}


@extra.get("/version")
async def koboldcpp_version() -> dict[str, str]:
    return {"result": "KoboldCpp", "version": KOBOLDCPP_VERSION}


@united.get("/config/soft_prompts_list")
async def soft_prompts() -> dict[str, list[str]]:
    """Soft prompts do not exist here; clients only need the list to be empty."""
    return {"values": []}


@united.get("/config/soft_prompt")
async def current_soft_prompt() -> dict[str, str]:
    return {"value": ""}


@united.put("/config/soft_prompt")
async def set_soft_prompt() -> dict[str, Any]:
    return {}


router.include_router(united, prefix="/v1")
router.include_router(united, prefix="/latest", include_in_schema=False)
router.include_router(extra)
