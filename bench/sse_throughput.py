"""SSE throughput: the real server on the scripted engine against a bare ASGI app, one run.

The scripted model answers with 20,000 tokens at zero delay, so what is measured is our
pipeline (engine bridge, output parser, chunk encoding, SSE) and uvicorn. Beside it, a bare
ASGI app replays the very same chunk bytes under the same uvicorn: the floor of what any server
could do here. Both are read by the same httpx client, for 1 stream and for 32 concurrent ones.
Run: ``make bench`` (or ``.venv/bin/python -m bench.sse_throughput`` from the repository root).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn
import yaml

from tabby_fixed.config import load_config
from tests.live_server import live_server

TOKENS = 20_000
BODY = {"model": "long", "messages": [{"role": "user", "content": "go"}], "stream": True, "max_tokens": TOKENS}


async def read_streams(url: str, count: int, headers: dict[str, str]) -> float:
    """Seconds for ``count`` concurrent streams to be read to the end."""
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=count)) as client:
        async def one() -> None:
            async with client.stream("POST", url, json=BODY, headers=headers) as response:
                async for _ in response.aiter_raw():
                    pass

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(count)))
        return time.perf_counter() - started


class BareApp:
    """Replays pre-made SSE chunks, one body message each: no parsing, no JSON, no engine."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for chunk in self.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@contextlib.contextmanager
def serve_bare(chunks: list[bytes]) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(BareApp(chunks), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        thread.join(10)


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "models" / "long"
        folder.mkdir(parents=True)
        (folder / "scripted.yml").write_text(yaml.safe_dump({"default": "word " * (TOKENS // 2), "max_seq_len": 65536}))
        config = load_config(["--model-dir", str(Path(root) / "models"), "--model-name", "long",
                              "--disable-auth", "true"], environ={}, cwd=Path(root))
        with live_server(config) as server:
            url = server.v1 + "/chat/completions"
            body = httpx.post(url, json=BODY, timeout=300).content
            chunks = [frame + b"\r\n\r\n" for frame in body.split(b"\r\n\r\n") if frame]
            ours = {n: asyncio.run(read_streams(url, n, {})) for n in (1, 32)}
        with serve_bare(chunks) as bare_url:
            bare = {n: asyncio.run(read_streams(bare_url, n, {})) for n in (1, 32)}
    print(f"{len(chunks)} SSE chunks per stream ({TOKENS} tokens)")
    for n in (1, 32):
        ours_rate, bare_rate = TOKENS * n / ours[n], TOKENS * n / bare[n]
        print(f"{n:>2} stream(s): tabby-fixed {ours_rate:9.0f} tok/s   bare ASGI {bare_rate:9.0f} tok/s   "
              f"ratio {ours_rate / bare_rate:.2f}")


if __name__ == "__main__":
    main()
