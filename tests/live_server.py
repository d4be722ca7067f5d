"""A real uvicorn server on 127.0.0.1 with a random port, in a background thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from tabby_fixed.config import TabbyConfig
from tabby_fixed.server.app import create_app


@dataclass
class LiveServer:
    app: FastAPI
    url: str

    @property
    def v1(self) -> str:
        return self.url + "/v1"


@contextlib.contextmanager
def live_server(config: TabbyConfig) -> Iterator[LiveServer]:
    with live_app(create_app(config)) as server:
        yield server


@contextlib.contextmanager
def live_app(app: FastAPI) -> Iterator[LiveServer]:
    """Any ASGI app under real uvicorn: the server tests' and the probe tests' stand-in servers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield LiveServer(app, f"http://127.0.0.1:{sock.getsockname()[1]}")
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
