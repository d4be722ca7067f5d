"""Server-sent events: framing, keep-alive pings, and running several jobs as one stream.

Frames are ``data: <json>`` ended by a blank line (CRLF, as upstream's sse-starlette writes
them). While the engine is silent (a long prefill), a comment line ``: ping - <time>`` goes out
every ``sse_ping_interval`` seconds so proxies and clients with idle timeouts keep the
connection. When the client goes away, Starlette cancels the response's iterator; the
``finally`` blocks below close the engine iterators, which cancels their jobs.

A client that stays connected but reads slower than the model writes (or not at all) holds the
response's writes; then at most ``max_queued`` steps wait here, and the jobs are not read any
further until the client catches up, so a stalled client costs a bounded amount of memory.
"""

from __future__ import annotations

import asyncio
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


def sse_response(body: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> StreamingResponse:
    return StreamingResponse(body, media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})})


async def run_jobs(iterators: list[AsyncIterator[T]], ping_interval: float,
                   max_queued: int = 256) -> AsyncIterator[list[tuple[int, T]] | None]:
    """Items of several jobs, tagged with the job's position, in batches of what has arrived;
    None when ``ping_interval`` seconds pass without any (0: never).

    Each job drains into one queue from its own task; the queue holds at most ``max_queued``
    items, and a job's task waits (reading nothing more from its job) while it is full.
    Whatever is waiting in the queue is taken at once, so a burst of tokens leaves in one write,
    and a timer is set only when the queue is empty. An error in any job is raised here; closing
    this iterator cancels every job.
    """
    queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue(max(max_queued, 1))
    finished = object()

    async def drain(index: int, iterator: AsyncIterator[T]) -> None:
        try:
            async for item in iterator:
                await queue.put((index, item))
        except Exception as error:  # handed to the consumer, which raises it
            await queue.put((index, error))
            return
        await queue.put((index, finished))

    tasks = [asyncio.ensure_future(drain(i, it)) for i, it in enumerate(iterators)]
    try:
        running = len(tasks)
        while running:
            arrived = []
            if queue.empty():
                try:
                    arrived.append(await asyncio.wait_for(queue.get(), ping_interval or None))
                except asyncio.TimeoutError:
                    yield None
                    continue
            while not queue.empty():
                arrived.append(queue.get_nowait())
            batch = []
            for index, item in arrived:
                if item is finished:
                    running -= 1
                elif isinstance(item, Exception):
                    if batch:  # what arrived before the failure still goes out
                        yield batch
                    raise item
                else:
                    batch.append((index, item))
            if batch:
                yield batch
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for iterator in iterators:
            close = getattr(iterator, "aclose", None)
            if close is not None:  # now, not at garbage collection: for an engine job, that cancels it
                await close()
