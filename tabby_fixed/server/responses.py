"""The OpenAI Responses routes: ``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``.

Codex CLI speaks only this API. A request is translated into a chat request
(``responses_models.py``) and served by the same pipeline as chat completions (``ChatJob``);
only the wire shape is the Responses API's. Output items: a ``reasoning`` item (its text as
``reasoning_text`` content), a ``message`` with one ``output_text`` part, and one
``function_call`` item per call, in the order the model wrote them.

A stream is ``response.created``, ``response.in_progress``, then per item
``response.output_item.added``, its parts and deltas (``response.content_part.added``,
``response.output_text.delta``/``done``, ``response.content_part.done``;
``response.reasoning_text.delta``/``done``; ``response.function_call_arguments.delta``/``done``)
and ``response.output_item.done``; then ``response.completed`` (``response.incomplete`` when
``max_output_tokens`` or the context ran out, ``response.failed`` on an error after the start).
Every event carries its ``event:`` line and a ``sequence_number``.

With ``store`` (the default), the response and its conversation are kept in memory
(``response_store.py``) for ``previous_response_id`` and ``GET``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..errors import ApiError, not_found
from ..output import BlockText, OutputEvent
from ..reasoning import ReasoningDelta
from ..toolcalls import ContentDelta, ToolCallArgs, ToolCallBegin, ToolCallEnd
from .openai import ChatJob, Done, finish_reason, stream_settings
from .response_store import ResponseStore
from .responses_models import InputItem, ResponsesRequest, to_chat_request
from .sse import frame, ping
from .state import ApiPermission, read_json

router = APIRouter(prefix="/v1", tags=["responses"])


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _store(request: Request) -> ResponseStore:
    return request.app.state.responses


def _reasoning_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "status": status, "summary": [],
            "content": [{"type": "reasoning_text", "text": text}] if text else []}


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(item_id: str, text: str | None, status: str = "completed") -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [_text_part(text)] if text is not None else []}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}


class _Response:
    """The response object of one request, from ``in_progress`` to its end."""

    def __init__(self, body: ResponsesRequest, model: str) -> None:
        self.object: dict[str, Any] = {
            "id": _id("resp"), "object": "response", "created_at": int(time.time()), "status": "in_progress",
            "model": model, "output": [], "error": None, "incomplete_details": None,
            "instructions": body.instructions, "tools": [t.model_dump() for t in body.tools or []],
            "tool_choice": body.tool_choice or "auto", "parallel_tool_calls": body.parallel_tool_calls,
            "max_output_tokens": body.max_output_tokens, "temperature": body.temperature, "top_p": body.top_p,
            "previous_response_id": body.previous_response_id, "store": body.store,
            "reasoning": body.reasoning.model_dump() if body.reasoning else None,
            "text": body.text.model_dump() if body.text else {"format": {"type": "text"}},
            "metadata": {}, "usage": None}

    def finish(self, done: Done, output: list[dict[str, Any]]) -> dict[str, Any]:
        finish = done.finish
        incomplete = finish_reason(finish, done.output) == "length"
        self.object.update(
            status="incomplete" if incomplete else "completed", output=output,
            incomplete_details={"reason": "max_output_tokens"} if incomplete else None,
            usage={"input_tokens": finish.prompt_tokens,
                   "input_tokens_details": {"cached_tokens": finish.cached_tokens},
                   "output_tokens": finish.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": finish.prompt_tokens + finish.completion_tokens})
        return self.object


@router.post("/responses")
async def create(request: Request, permission: ApiPermission) -> Response:
    body: ResponsesRequest = await read_json(request, ResponsesRequest)
    history: list[dict[str, Any]] = []
    if body.previous_response_id is not None:
        stored = _store(request).get(body.previous_response_id)
        if stored is None:
            raise not_found(f"There is no stored response '{body.previous_response_id}' (it was never stored, was "
                            f"deleted, or expired).", param="previous_response_id")
        history = stored.items
    chat = to_chat_request(body, [InputItem.model_validate(item) for item in history])
    job = await ChatJob.start(request, permission, chat)
    response = _Response(body, job.model.name)
    new_items = [{"type": "message", "role": "user", "content": body.input}] if isinstance(body.input, str) \
        else [item.model_dump(exclude_none=True) for item in body.input]

    def keep(done: Done, output: list[dict[str, Any]]) -> dict[str, Any]:
        result = response.finish(done, output)
        if body.store:
            _store(request).put(result, history + new_items + output)
        return result

    answer = _Events(response, keep)
    return await job.respond(stream_settings(request, chat), answer, answer.failed)


@router.get("/responses/{response_id}")
async def retrieve(request: Request, response_id: str, permission: ApiPermission) -> dict[str, Any]:
    stored = _store(request).get(response_id)
    if stored is None:
        raise not_found(f"There is no stored response '{response_id}'.", param="response_id")
    return stored.response


@router.delete("/responses/{response_id}")
async def delete(request: Request, response_id: str, permission: ApiPermission) -> dict[str, Any]:
    if not _store(request).delete(response_id):
        raise not_found(f"There is no stored response '{response_id}'.", param="response_id")
    return {"id": response_id, "object": "response.deleted", "deleted": True}


class _Events:
    """Output events to ``response.*`` events and output items, one item open at a time, numbered
    by position; the whole response is built the same way, so both ways give the same items.
    Blank lines around thoughts and calls do not become items (``BlockText``)."""

    def __init__(self, response: _Response, keep: Callable[[Done, list[dict[str, Any]]], dict[str, Any]]) -> None:
        self._response = response
        self._keep = keep
        self._sequence = 0
        self._output: list[dict[str, Any]] = []  # finished items
        self._item: dict[str, Any] | None = None  # the open item
        self._text: list[str] = []  # the open item's text or arguments so far
        self._blank = BlockText()

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return f"event: {kind}\r\n".encode() + frame(payload)

    @property
    def whole(self) -> dict[str, Any]:
        return self._response.object

    async def stream(self, events: AsyncIterator[OutputEvent | Done | None]) -> AsyncIterator[bytes]:
        yield self._event("response.created", response=self._response.object)
        yield self._event("response.in_progress", response=self._response.object)
        async for item in events:
            if item is None:
                yield ping()  # a comment: this API has no keep-alive event, and parsers skip comments
                continue
            yield self.end(item) if isinstance(item, Done) else self.on(item)

    def end(self, done: Done) -> bytes:
        out = self._close()
        result = self._keep(done, self._output)
        return out + self._event(f"response.{result['status']}", response=result)

    def failed(self, error: ApiError) -> bytes:
        self._response.object.update(status="failed", output=self._output,
                                     error={"code": error.code or error.type, "message": error.message})
        return self._event("response.failed", response=self._response.object)

    @property
    def _index(self) -> int:
        return len(self._output)

    def on(self, item: OutputEvent) -> bytes:
        if isinstance(item, ReasoningDelta):
            out = self._open("reasoning") if self._kind != "reasoning" else b""
            self._text.append(item.text)
            return out + self._event("response.reasoning_text.delta", item_id=self._item_id, output_index=self._index,
                                     content_index=0, delta=item.text)
        if isinstance(item, ContentDelta):
            text = self._blank.text(item.text, self._kind == "message")
            if text is None:
                return b""
            out = self._open("message") if self._kind != "message" else b""
            self._text.append(text)
            return out + self._event("response.output_text.delta", item_id=self._item_id, output_index=self._index,
                                     content_index=0, delta=text, logprobs=[])
        if isinstance(item, ToolCallBegin):
            self._blank.drop()
            return self._open("function_call", item.name, item.call_id)
        if isinstance(item, ToolCallArgs):
            self._text.append(item.fragment)
            return self._event("response.function_call_arguments.delta", item_id=self._item_id,
                               output_index=self._index, delta=item.fragment)
        if isinstance(item, ToolCallEnd):
            return self._close()
        return b""

    @property
    def _kind(self) -> str | None:
        return self._item["type"] if self._item else None

    @property
    def _item_id(self) -> str:
        return self._item["id"] if self._item else ""

    def _open(self, kind: str, name: str = "", call_id: str | None = None) -> bytes:
        out = self._close()
        if kind == "reasoning":
            self._item = _reasoning_item(_id("rs"), "", "in_progress")
        elif kind == "message":
            self._item = _message_item(_id("msg"), None, "in_progress")
        else:
            self._item = _call_item(_id("fc"), call_id or _id("call"), name, "", "in_progress")  # Kimi's own id
        out += self._event("response.output_item.added", output_index=self._index, item=self._item)
        if kind == "message":
            out += self._event("response.content_part.added", item_id=self._item_id, output_index=self._index,
                               content_index=0, part=_text_part(""))
        return out

    def _close(self) -> bytes:
        if self._item is None:
            return b""
        text, kind, item_id, index = "".join(self._text), self._kind, self._item_id, self._index
        out = b""
        if kind == "reasoning":
            done = _reasoning_item(item_id, text)
            out += self._event("response.reasoning_text.done", item_id=item_id, output_index=index, content_index=0,
                               text=text)
        elif kind == "message":
            done = _message_item(item_id, text)
            out += self._event("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                               text=text, logprobs=[])
            out += self._event("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                               part=_text_part(text))
        else:
            done = _call_item(item_id, self._item["call_id"], self._item["name"], text)
            out += self._event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                               name=done["name"], arguments=text)
        out += self._event("response.output_item.done", output_index=index, item=done)
        self._output.append(done)
        self._item, self._text = None, []
        return out
