"""Server-sent events: framing, keep-alive pings, and running several jobs as one stream.

Frames are ``data: <json>`` ended by a blank line (CRLF, as upstream's sse-starlette writes
them). While the engine is silent (a long prefill), a comment line ``: ping - <time>`` goes out
every ``sse_ping_interval`` seconds so proxies and clients with idle timeouts keep the
connection. When the client goes away, Starlette cancels the response's iterator; the
``finally`` blocks below close the engine iterators, which cancels their jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any, TypeVar

from starlette.responses import StreamingResponse

T = TypeVar("T")

SSE_HEADERS = {"Cache-Control": "no-store", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
DONE = b"data: [DONE]\r\n\r\n"


def frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\r\n\r\n"


def ping() -> bytes:
    return f": ping - {datetime.now(timezone.utc).isoformat(sep=' ')}\r\n\r\n".encode()


def sse_response(body: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)


async def with_pings(items: AsyncIterator[T], interval: float) -> AsyncIterator[T | None]:
    """The items, with a None whenever ``interval`` seconds pass without one (0: never)."""
    pending: asyncio.Future[T] | None = None
    try:
        if interval <= 0:
            async for item in items:
                yield item
            return
        while True:
            if pending is None:
                pending = asyncio.ensure_future(items.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield None
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await pending
        await _close(items)


async def _close(iterator: AsyncIterator[Any]) -> None:
    """Close an iterator now rather than at garbage collection: for an engine job, that cancels it."""
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


async def merge(iterators: list[AsyncIterator[T]]) -> AsyncIterator[tuple[int, T]]:
    """Items of several iterators as they come, tagged with the iterator's position.

    One iterator is simply relayed. Several run as tasks feeding one queue; an error in any of
    them is raised here, and closing the merge cancels them all.
    """
    if len(iterators) == 1:
        try:
            async for item in iterators[0]:
                yield 0, item
        finally:
            await _close(iterators[0])
        return
    queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
    finished = object()

    async def drain(index: int, iterator: AsyncIterator[T]) -> None:
        try:
            async for item in iterator:
                await queue.put((index, item))
        except Exception as error:  # handed to the consumer, which raises it
            await queue.put((index, error))
        finally:
            await queue.put((index, finished))

    tasks = [asyncio.ensure_future(drain(i, it)) for i, it in enumerate(iterators)]
    try:
        running = len(tasks)
        while running:
            index, item = await queue.get()
            if item is finished:
                running -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield index, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for iterator in iterators:
            await _close(iterator)
