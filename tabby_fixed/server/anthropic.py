"""The Anthropic Messages routes: ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

Claude Code speaks only this API. A Messages request is translated into a chat request
(``anthropic_models.py``) and served by the same pipeline as chat completions (``ChatJob``); only
the wire shape is Anthropic's. A stream is ``message_start``, then each content block as
``content_block_start``, its deltas (``thinking_delta`` then ``signature_delta``, ``text_delta``,
``input_json_delta``) and ``content_block_stop``, blocks numbered by position; then
``message_delta`` with ``stop_reason`` and usage, and ``message_stop``. Every event has its
``event:`` line (the SDK skips events without one); ``ping`` events keep a silent stream alive.
Usage counts ``input_tokens`` without the prompt tokens reused from the prefix cache, which are
``cache_read_input_tokens``; the stream's ``message_start`` reports 0 input tokens (they are known
once the engine has tokenized the prompt) and ``message_delta`` the real counts.

Errors, before or during a stream, are Anthropic's shape:
``{"type": "error", "error": {"type": ..., "message": ...}}``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..chat import build_prompt
from ..engine.base import Finish
from ..errors import ApiError
from ..output import BlockText, ChatOutput, OutputEvent
from ..reasoning import ReasoningDelta
from ..toolcalls import ContentDelta, ToolCallArgs, ToolCallBegin, ToolCallEnd
from .anthropic_models import MessagesRequest, to_chat_request
from .openai import ChatJob, Done, finish_reason, stream_settings
from .sse import frame
from .state import ApiPermission, read_json, serving

router = APIRouter(prefix="/v1", tags=["anthropic"])

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}


def error_body(error: ApiError) -> dict[str, Any]:
    """An ``ApiError`` in Anthropic's shape; the type follows the status, as Anthropic's do."""
    kind = _ERROR_TYPES.get(error.status, "invalid_request_error" if error.status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\r\n".encode() + frame(payload)


def _error_event(error: ApiError) -> bytes:
    return event("error", error_body(error))


def signature(thinking: str) -> str:
    """Anthropic signs thinking blocks so they can be sent back; clients only carry the field
    along. Ours is a digest of the text: stable, and it says where it came from."""
    return "tabby-fixed:" + hashlib.sha256(thinking.encode()).hexdigest()


def _stop(finish: Finish, output: ChatOutput, stop_sequences: list[str]) -> tuple[str, str | None]:
    """``stop_reason`` and ``stop_sequence``."""
    reason = finish_reason(finish, output)
    if reason == "length":
        return "max_tokens", None
    if reason == "tool_calls":
        return "tool_use", None
    if finish.stop_str is not None and finish.stop_str in stop_sequences:
        return "stop_sequence", finish.stop_str
    return "end_turn", None


def _usage(finish: Finish) -> dict[str, int]:
    return {"input_tokens": finish.prompt_tokens - finish.cached_tokens, "output_tokens": finish.completion_tokens,
            "cache_read_input_tokens": finish.cached_tokens, "cache_creation_input_tokens": 0}


def _tool_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"


@router.post("/messages")
async def messages(request: Request, permission: ApiPermission) -> Response:
    body: MessagesRequest = await read_json(request, MessagesRequest)
    chat = to_chat_request(body)
    job = await ChatJob.start(request, permission, chat)
    message = _Message(f"msg_{uuid.uuid4().hex}", job.model.name, body.stop_sequences or [])
    return await job.respond(stream_settings(request, chat), message, _error_event)


@router.post("/messages/count_tokens")
async def count_tokens(request: Request, permission: ApiPermission) -> dict[str, int]:
    """The prompt's tokens as this model's template and tokenizer make them."""
    body: MessagesRequest = await read_json(request, MessagesRequest)
    chat = to_chat_request(body)
    model = await serving(request.app, chat.model, permission)
    prompt = build_prompt(model.chat, chat.chat_input())
    return {"input_tokens": len(await asyncio.to_thread(model.engine.encode, prompt))}  # off the event loop


class _Message:
    """One answer: output events to content blocks, numbered by position, as stream events and
    as the whole message (``body``), so both ways give the same blocks.

    Blank lines around thoughts and calls do not become blocks (``BlockText``).
    """

    def __init__(self, message_id: str, model: str, stop_sequences: list[str]) -> None:
        self.body: dict[str, Any] = {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}
        self._stop_sequences = stop_sequences
        self._open: dict[str, Any] | None = None  # the open block, also the last of body["content"]
        self._pieces: list[str] = []  # the open block's text, thinking or JSON so far, joined when it closes
        self._text = BlockText()

    @property
    def whole(self) -> dict[str, Any]:
        return self.body

    async def stream(self, events: AsyncIterator[OutputEvent | Done | None]) -> AsyncIterator[bytes]:
        yield event("message_start", {"type": "message_start", "message": {**self.body, "content": []}})
        async for item in events:
            if item is None:
                yield event("ping", {"type": "ping"})
            elif isinstance(item, Done):
                yield self.end(item)
            else:
                yield self.on(item)

    def on(self, item: OutputEvent) -> bytes:
        if isinstance(item, ReasoningDelta):
            out = self._start({"type": "thinking", "thinking": "", "signature": ""})
            self._pieces.append(item.text)
            return out + self._delta({"type": "thinking_delta", "thinking": item.text})
        if isinstance(item, ContentDelta):
            text = self._text.text(item.text, self._kind == "text")
            if text is None:
                return b""
            out = self._start({"type": "text", "text": ""})
            self._pieces.append(text)
            return out + self._delta({"type": "text_delta", "text": text})
        if isinstance(item, ToolCallBegin):
            self._text.drop()
            return self._start({"type": "tool_use", "id": item.call_id or _tool_id(), "name": item.name, "input": {}})
        if isinstance(item, ToolCallArgs):
            self._pieces.append(item.fragment)
            return self._delta({"type": "input_json_delta", "partial_json": item.fragment})
        if isinstance(item, ToolCallEnd):
            return self._close()
        return b""

    def end(self, done: Done) -> bytes:
        out = self._close()
        stop_reason, stop_sequence = _stop(done.finish, done.output, self._stop_sequences)
        self.body.update(stop_reason=stop_reason, stop_sequence=stop_sequence, usage=_usage(done.finish))
        return out + event("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": self.body["usage"]}) + event("message_stop", {"type": "message_stop"})

    @property
    def _kind(self) -> str | None:
        return self._open["type"] if self._open else None

    @property
    def _index(self) -> int:
        return len(self.body["content"]) - 1

    def _start(self, block: dict[str, Any]) -> bytes:
        """A new block, unless one of this kind is open (a tool_use block always starts anew)."""
        if self._kind == block["type"] != "tool_use":
            return b""
        out = self._close()
        self._open = block
        self.body["content"].append(block)
        return out + event("content_block_start", {"type": "content_block_start", "index": self._index,
                                                   "content_block": {**block}})

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return event("content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta})

    def _close(self) -> bytes:
        block = self._open
        if block is None:
            return b""
        out = b""
        whole, self._pieces = "".join(self._pieces), []  # joined once: += per delta would copy it each time
        if block["type"] == "thinking":
            block["thinking"] = whole
            block["signature"] = signature(whole)
            out = self._delta({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "text":
            block["text"] = whole
        elif block["type"] == "tool_use":
            block["input"] = _input(whole)
        self._open = None
        return out + event("content_block_stop", {"type": "content_block_stop", "index": self._index})


def _input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object Anthropic sends; a call cut short (``max_tokens``) has none."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
