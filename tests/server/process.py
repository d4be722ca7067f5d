"""The server as its own process, for what an in-process server cannot show: its memory (RSS),
and staying responsive while a request's work would hold the interpreter."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass
class ServerProcess:
    url: str
    pid: int

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def rss_mb(self) -> float:
        """Resident memory now, from /proc (Linux)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def server_process(root: Path, model: str, *flags: str) -> Iterator[ServerProcess]:
    """``python -m tabby_fixed serve`` on a free port with root as its folder (api_tokens.yml there)."""
    port = _free_port()
    command = [sys.executable, "-m", "tabby_fixed", "serve", "--model-dir", str(root / "models"),
               "--model-name", model, "--host", "127.0.0.1", "--port", str(port), *flags]
    env = {**os.environ, "TABBY_LOG_LEVEL": "warning", "PYTHONPATH": str(Path(__file__).parents[2])}
    log_path = root / f"server-{port}.log"  # a file, not a pipe nobody reads while the server runs
    log = log_path.open("wb")
    process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited: {log_path.read_text(errors='replace')[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)
        yield ServerProcess(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
