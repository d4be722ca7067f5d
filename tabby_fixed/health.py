"""``tabby-fixed health``: exit 0 when the local server answers ``/health``, for a container HEALTHCHECK.

A HEALTHCHECK line cannot see the flags the server was started with, so the server writes the
URL it listens on to the file named by ``TABBY_ADDRESS_FILE`` (the image sets it), and this
command reads it; without the file it works the port out from ./config.yml and the environment,
as ``serve`` would. Either way a port changed by a flag, the config or the environment is
followed, unlike a fixed ``curl http://127.0.0.1:5000/health``.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path

import httpx

from .config import ConfigError, load_config

ADDRESS_FILE_ENV = "TABBY_ADDRESS_FILE"


def local_url(host: str, port: int) -> str:
    """The URL of /health on a server listening on host:port, as seen from the same machine."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}/health"
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    shown = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{shown}:{port}/health"


def record_address(host: str, port: int) -> None:
    """Write the /health URL for ``tabby-fixed health`` when ``TABBY_ADDRESS_FILE`` names a file."""
    target = os.environ.get(ADDRESS_FILE_ENV)
    if target:
        Path(target).write_text(local_url(host, port) + "\n", encoding="utf-8")


def _configured_url() -> str:
    target = os.environ.get(ADDRESS_FILE_ENV)
    if target and Path(target).is_file():
        return Path(target).read_text(encoding="utf-8").strip()
    config = load_config([])
    return local_url(config.network.host, config.network.port)


def add_health_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="the /health URL to check (default: where the server here listens)")
    parser.add_argument("--timeout", type=float, default=5, help="seconds to wait for the answer (default 5)")


def run_health(options: argparse.Namespace) -> int:
    try:
        url = options.url or _configured_url()
    except ConfigError as error:
        print(f"tabby-fixed health: {error}", file=sys.stderr)
        return 2
    try:
        response = httpx.get(url, timeout=options.timeout)
    except httpx.HTTPError as error:
        print(f"tabby-fixed health: {url}: {error}", file=sys.stderr)
        return 1
    if response.status_code != 200:
        print(f"tabby-fixed health: {url}: HTTP {response.status_code}: {response.text[:200]}", file=sys.stderr)
        return 1
    return 0
