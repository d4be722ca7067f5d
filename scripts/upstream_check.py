"""``make upstream-check``: the seed reports' tool-call shapes through upstream TabbyAPI's own endpoint.

For the stock tree (the pinned commit) and the patched tree (the same commit with ``patches/``),
and for each of qwen3_coder, glm4_5 and minimax_m2, this starts upstream's FastAPI app under
uvicorn with only the model container replaced (``scripts/upstream_standin.py``: a container that
streams a scripted text in small chunks), posts every conformance case with its tools through the
OpenAI SDK, non-streaming and streaming in 1- and 3-character chunks, and compares the calls,
content and finish reason with what a correct server returns. It prints one row per format and
seed shape, stock and patched side by side, then runs upstream's own test suite and its pinned
ruff (check and format) on the patched tree.

Upstream's dependencies live in their own virtual environment (``.upstream-venv``), installed from
the patched tree's ``pyproject.toml`` with ``pip install <tree>``: its base dependencies all install
on CPU, and torch and exllamav3 (its ``cu12``/``cu13`` extras) are not needed because the model
container is the stand-in.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabby_fixed.toolcalls.conformance import CASES, TOOLS, ConformanceCase, mismatch

HERE = Path(__file__).resolve().parent
FORMATS = ("qwen3_coder", "glm4_5", "minimax_m2")
MODES = (("non-streaming", False, 3), ("streaming, 1-char chunks", True, 1), ("streaming, 3-char chunks", True, 3))
SHAPES = {"000": "JSON-looking strings, indentation", "001": "quoted names",
          "002": "bare <function=> (and in prose)", "004": "name= attributes, nameless JSON",
          "-": "unparseable tool-call text -> content"}


def ensure_venv(venv: Path, tree: Path) -> Path:
    """Upstream's dependencies from the tree's pyproject.toml, reinstalled when it changes."""
    python = venv / "bin" / "python"
    stamp = venv / ".installed-from"
    wanted = (tree / "pyproject.toml").read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"Installing upstream's dependencies into {venv} (pip install {tree}[dev]) ...", flush=True)
    # [dev]: upstream's pinned ruff. httpx: upstream's tests use FastAPI's TestClient
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"{tree}[dev]", "httpx"], check=True)
    stamp.write_text(wanted)
    return python


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def upstream_server(python: Path, tree: Path, tool_format: str, log: Path) -> Iterator[str]:
    """Upstream's app from ``tree`` with the stand-in container, on a free port; yields its /v1 URL."""
    port = _free_port()
    with log.open("w") as output:
        server = subprocess.Popen([str(python), str(HERE / "upstream_standin.py"), "--tool-format", tool_format,
                                   "--port", str(port)], cwd=tree, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"upstream's app did not start from {tree}; see {log}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(timeout=10)


@dataclass
class Reply:
    calls: list[tuple[str, str]]
    content: str | None
    finish_reason: str | None


def ask(client: Any, case: ConformanceCase, stream: bool, chunk: int) -> Reply:
    """One chat completion whose "model" writes the case's text in pieces of ``chunk`` characters."""
    request = {"model": "stand-in", "tools": TOOLS, "stream": stream,
               "messages": [{"role": "user", "content": json.dumps({"emit": case.text, "chunk": chunk})}]}
    if not stream:
        choice = client.chat.completions.create(**request).choices[0]
        calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
        return Reply(calls, choice.message.content, choice.finish_reason)
    content, finish, calls = "", None, {}
    for chunk_ in client.chat.completions.create(**request):
        for choice in chunk_.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                name, arguments = calls.get(call.index, ("", ""))
                calls[call.index] = (name + (call.function.name or ""), arguments + (call.function.arguments or ""))
    return Reply([calls[i] for i in sorted(calls)], content or None, finish)


def problem(case: ConformanceCase, reply: Reply) -> str | None:
    wrong = mismatch(case, reply.calls, reply.content)
    expected_finish = "tool_calls" if case.calls else "stop"
    if wrong is None and reply.finish_reason != expected_finish:
        wrong = f"finish_reason {reply.finish_reason!r}, expected {expected_finish!r}"
    return wrong


def run_tree(python: Path, tree: Path, logs: Path) -> dict[tuple[str, str], list[str]]:
    """Per (format, seed): one entry per case and mode, '' when right, else what went wrong."""
    from openai import APIError, OpenAI

    results: dict[tuple[str, str], list[str]] = {}
    for tool_format in FORMATS:
        with upstream_server(python, tree, tool_format, logs / f"{tree.name}-{tool_format}.log") as url:
            client = OpenAI(base_url=url, api_key="stand-in", max_retries=0, timeout=30)
            for case in (c for c in CASES if c.tool_format == tool_format):
                for mode, stream, chunk in MODES:
                    try:
                        wrong = problem(case, ask(client, case, stream, chunk))
                    except APIError as error:  # upstream answered with an error: a failed case, not a crash
                        wrong = f"request failed: {error}"
                    results.setdefault((tool_format, case.seed), []).append(
                        f"{case.name} ({mode}): {wrong}" if wrong else "")
    return results


def _cell(outcomes: list[str] | None) -> str:
    if outcomes is None:
        return "n/a"
    passed = outcomes.count("")
    return f"{passed}/{len(outcomes)} {'pass' if passed == len(outcomes) else 'FAIL'}"


def print_table(stock: dict[tuple[str, str], list[str]], patched: dict[tuple[str, str], list[str]]) -> bool:
    """The side-by-side table; True when every patched row passes."""
    print(f"\n{'format':<12} {'seed':<5} {'shape':<38} {'stock':>12} {'patched':>12}")
    all_pass = True
    for tool_format in FORMATS:
        for seed, shape in SHAPES.items():
            if (tool_format, seed) not in patched:
                continue
            outcomes = patched[(tool_format, seed)]
            all_pass &= all(o == "" for o in outcomes)
            print(f"{tool_format:<12} {seed:<5} {shape:<38} {_cell(stock.get((tool_format, seed))):>12} "
                  f"{_cell(outcomes):>12}")
    print(f"(cases x modes per cell; modes: {', '.join(m for m, _, _ in MODES)})")
    return all_pass


def upstream_tests(python: Path, tree: Path) -> tuple[bool, str]:
    """Upstream's own unittest suite (tests/test_*.py) in the tree; (passed, its summary)."""
    modules = sorted(f"tests.{p.stem}" for p in (tree / "tests").glob("test_*.py"))
    run = subprocess.run([str(python), "-m", "unittest", *modules], cwd=tree, capture_output=True, text=True)
    lines = [line for line in run.stderr.splitlines() if line.startswith(("Ran ", "OK", "FAILED"))]
    failures = [line for line in run.stderr.splitlines() if line.startswith(("ERROR:", "FAIL:"))]
    return run.returncode == 0, " ".join(lines + failures)


def upstream_ruff(python: Path, tree: Path) -> tuple[bool, str]:
    """Upstream's pinned ruff, check and format, over the tree."""
    ruff = [str(python), "-m", "ruff"]
    version = subprocess.run([*ruff, "--version"], capture_output=True, text=True).stdout.strip()
    lint = subprocess.run([*ruff, "check", "--quiet", "."], cwd=tree, capture_output=True, text=True)
    form = subprocess.run([*ruff, "format", "--check", "--quiet", "."], cwd=tree, capture_output=True, text=True)
    problems = (lint.stdout + form.stdout).strip()
    return not lint.returncode and not form.returncode, f"{version}: " + (problems or "check and format clean")


def check(stock: Path, patched: Path, venv: Path, logs: Path) -> int:
    """Both trees through the endpoint, the table, upstream's tests; 0 when the patched tree passes."""
    logs.mkdir(parents=True, exist_ok=True)
    python = ensure_venv(venv, patched)
    print(f"Posting {len(CASES)} cases x {len(MODES)} modes to upstream's /v1/chat/completions, stock and patched ...",
          flush=True)
    stock_results = run_tree(python, stock, logs)
    patched_results = run_tree(python, patched, logs)
    all_pass = print_table(stock_results, patched_results)
    for outcomes in patched_results.values():
        for outcome in filter(None, outcomes):
            print(f"  patched FAIL  {outcome}")
    tests_pass, summary = upstream_tests(python, patched)
    stock_summary = upstream_tests(python, stock)[1]
    print(f"\nUpstream's test suite, patched: {summary}\nUpstream's test suite, stock:   {stock_summary}")
    ruff_pass, ruff_summary = upstream_ruff(python, patched)
    print(f"Upstream's ruff on the patched tree, {ruff_summary}")
    return 0 if all_pass and tests_pass and ruff_pass else 1
