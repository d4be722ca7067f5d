"""``tabby-fixed serve``: bind the port, check the keys, load the model, then serve.

The order is chosen so the cheap failures come first: a port in use or an unusable key file is
reported before a model spends minutes loading. Every failure a user can fix leaves as a
``StartupError`` with one line that says what, where and how to fix it; the command line prints
that line instead of a traceback.
"""

from __future__ import annotations

import errno
import logging
import socket

import uvicorn
from fastapi import FastAPI

from ..auth import KeyFileError
from ..config import TabbyConfig
from ..health import record_address
from .app import create_app
from .prepare import StartupError, prepare

logger = logging.getLogger(__name__)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, so the port is ours before the model loads."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        raise StartupError(f"network.host {host!r} is not an address this machine has ({error.strerror}); "
                           f"use 127.0.0.1, 0.0.0.0 or one of its own addresses") from error
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise StartupError(f"port {port} on {host} is already in use, perhaps by another server; stop it "
                               f"or choose another port with --port or network.port") from error
        raise StartupError(f"cannot listen on {host}:{port}: {error.strerror or error}") from error
    return sock


class _PreparedServer(uvicorn.Server):
    """Uvicorn's server, which loads the model on its own event loop before it starts serving."""

    def __init__(self, app: FastAPI, log_level: str) -> None:
        super().__init__(uvicorn.Config(app, log_level=log_level, lifespan="on"))
        self.app = app

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await prepare(self.app)
        if sockets:
            host, port = sockets[0].getsockname()[:2]
            logger.info("Serving on http://%s:%d (OpenAI base URL: /v1); Ctrl+C stops", host, port)
        await super().serve(sockets)


def serve(config: TabbyConfig, log_level: str) -> None:
    """Run the server until it is stopped; raises StartupError before serving when it cannot start."""
    sock = bind(config.network.host, config.network.port)
    record_address(config.network.host, sock.getsockname()[1])
    try:
        try:
            app = create_app(config)
        except KeyFileError as error:
            raise StartupError(f"{error}; fix the file, or delete it to have new keys written") from error
        _PreparedServer(app, log_level).run(sockets=[sock])
    finally:
        sock.close()
