"""Running ``tabby-fixed`` as a user would: a separate process, its output kept for the checks."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def checkout_env(**extra: str) -> dict[str, str]:
    """The environment for running the checkout's code, without any TABBY_ settings of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABBY_")}
    env["PYTHONPATH"] = str(REPO)
    return {**env, **extra}


def run_cli(args: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tabby_fixed", *args], cwd=cwd, env=env or checkout_env(),
                          capture_output=True, text=True, timeout=timeout)


def last_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else ""


@dataclass
class Running:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def running(command: Sequence[str], cwd: Path, env: Mapping[str, str], port: int, log: Path,
            wait: float = 60) -> Iterator[Running]:
    """A server process that answers /health on 127.0.0.1:port; stopped with SIGINT (Ctrl+C) on exit."""
    with log.open("w") as out:
        process = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                   text=True)
    server = Running(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + wait
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the server exited with {process.returncode}:\n{server.output()}")
            try:
                if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not answer within {wait} s:\n{server.output()}")
            time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
