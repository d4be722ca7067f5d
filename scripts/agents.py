"""``make test-agents``: the real coding agents, headless, against tabby-fixed with scripted models.

OpenCode and Qwen Code speak chat completions, Claude Code the Anthropic Messages API, Codex CLI
the Responses API. Each is installed from the npm registry at the versions pinned in
``tests/agents/package.json`` and its lock file (into ``.agents/``, ignored by git), then run once with a
temporary HOME and working folder, telemetry off, against a server that serves
``tests/agents/models/<agent>``: a scripted model that answers the task below with that agent's
own file-writing or shell tool. An agent passes when it exits 0 on its own and both files hold
exactly the bytes asked for.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "tests" / "agents"
INSTALL = ROOT / ".agents"
BIN = INSTALL / "node_modules" / ".bin"
API_KEY = "agents-" + "k" * 32
FILES = {"notes.txt": b"123", "data.json": b'    {"a": 1}'}


def task(work: Path) -> str:
    """The prompt every scripted agent model answers: two writes, one tool call per turn."""
    (first, first_value), (second, second_value) = FILES.items()
    return (f"write {work / first} containing exactly: {first_value.decode()}\n"
            f"then write {work / second} containing exactly: {second_value.decode()}")


#: The command line, its environment, and the text for its standard input (None: none).
Launch = tuple[list[str], dict[str, str], str | None]


@dataclass(frozen=True)
class Agent:
    name: str
    #: (home, work, base_url) -> how to start it on the task; writes the agent's settings into home.
    prepare: Callable[[Path, Path, str], Launch]


def _claude_code(home: Path, work: Path, url: str) -> Launch:
    env = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_AUTH_TOKEN": API_KEY, "ANTHROPIC_MODEL": "claude-code",
           "ANTHROPIC_DEFAULT_HAIKU_MODEL": "claude-code", "ANTHROPIC_DEFAULT_SONNET_MODEL": "claude-code",
           "ANTHROPIC_DEFAULT_OPUS_MODEL": "claude-code", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "IS_SANDBOX": "1"}  # lets --dangerously-skip-permissions run as root (CI containers)
    return [str(BIN / "claude"), "-p", task(work), "--dangerously-skip-permissions"], env, None


def _codex(home: Path, work: Path, url: str) -> Launch:
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model = "codex"\nmodel_provider = "tabby"\n\n'
        '[model_providers.tabby]\nname = "tabby-fixed"\n'
        f'base_url = "{url}/v1"\nenv_key = "TABBY_API_KEY"\nwire_api = "responses"\n\n'
        '[analytics]\nenabled = false\n')
    env = {"CODEX_HOME": str(codex_home), "TABBY_API_KEY": API_KEY}
    return [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
            task(work)], env, None


def _opencode(home: Path, work: Path, url: str) -> Launch:
    config = {"$schema": "https://opencode.ai/config.json", "model": "tabby/opencode", "autoupdate": False,
              "share": "disabled", "provider": {"tabby": {
                  "npm": "@ai-sdk/openai-compatible", "name": "tabby-fixed",
                  "options": {"baseURL": f"{url}/v1", "apiKey": API_KEY},
                  "models": {"opencode": {"name": "opencode"}}}}}
    path = home / "opencode.json"
    path.write_text(json.dumps(config, indent=2))
    env = {"OPENCODE_CONFIG": str(path), "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
           "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
    # The prompt goes in on stdin: `opencode run` quotes a message argument that holds spaces,
    # backslash-escaping its quotes. --title skips the title request; --pure the plugins.
    return [str(BIN / "opencode"), "run", "--title", "make test-agents", "--pure"], env, task(work)


def _qwen_code(home: Path, work: Path, url: str) -> Launch:
    settings = home / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"telemetry": {"enabled": False}, "privacy": {"usageStatisticsEnabled": False}}))
    env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": API_KEY, "OPENAI_MODEL": "qwen-code",
           "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
    return [str(BIN / "qwen"), "-p", task(work), "--yolo", "--auth-type", "openai"], env, None


AGENTS = [Agent("opencode", _opencode), Agent("qwen-code", _qwen_code), Agent("claude-code", _claude_code),
          Agent("codex", _codex)]


def install() -> None:
    """``npm install`` from the pinned package.json and lock file, skipped when ``.agents`` was
    installed from exactly these. (Not ``npm ci``: npm drops some platform-only optional packages
    from lock files it writes, and ``npm ci`` then refuses them as out of sync.)"""
    pins = b"".join((PINS / name).read_bytes() for name in ("package.json", "package-lock.json"))
    stamp = INSTALL / "installed-from.txt"
    wanted = hashlib.sha256(pins).hexdigest()
    if stamp.is_file() and stamp.read_text() == wanted and BIN.is_dir():
        return
    if shutil.which("npm") is None:
        raise SystemExit("make test-agents needs Node.js 20 or newer with npm on PATH (the agents come from npm)")
    INSTALL.mkdir(exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PINS / name, INSTALL / name)
    started = time.monotonic()
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=INSTALL, check=True)
    stamp.write_text(wanted)
    print(f"installed the agents in {time.monotonic() - started:.0f} s", flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def server(model: str, folder: Path) -> Iterator[str]:
    """tabby-fixed serving ``tests/agents/models/<model>`` with a known API key; its log goes to folder."""
    (folder / "api_tokens.yml").write_text(f"api_key: {API_KEY}\nadmin_key: admin-{API_KEY}\n")
    port = _free_port()
    with (folder / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tabby_fixed", "serve", "--model-dir", str(PINS / "models"), "--model-name", model,
             "--port", str(port)], cwd=folder, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start; see {folder / 'server.log'}")
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def run(agent: Agent, timeout: float) -> tuple[bool, float, str]:
    """Run one agent on the task: (passed, seconds, what went wrong)."""
    with tempfile.TemporaryDirectory(prefix=f"agent-{agent.name}-") as temp:
        root = Path(temp)
        home, work = root / "home", root / "work"
        home.mkdir()
        work.mkdir()
        with server(agent.name, root) as url:
            command, extra, stdin = agent.prepare(home, work, url)
            env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TERM": "dumb", "NO_COLOR": "1",
                   "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
                   "XDG_DATA_HOME": str(home / ".local" / "share"), **extra}
            started = time.monotonic()
            try:
                done = subprocess.run(command, cwd=work, env=env, input=(stdin or "").encode(), capture_output=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                return False, time.monotonic() - started, f"did not exit within {timeout:.0f} s\n" + _tail(root)
            seconds = time.monotonic() - started
        problems = [f"exit status {done.returncode}"] if done.returncode else []
        for name, wanted in FILES.items():
            path = work / name
            got = path.read_bytes() if path.is_file() else None
            if got != wanted:
                problems.append(f"{name}: expected {wanted!r}, found {got!r}")
        if problems:
            output = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
            return False, seconds, "; ".join(problems) + "\n--- agent output ---\n" + output + _tail(root)
        return True, seconds, ""


def _tail(root: Path) -> str:
    log = root / "server.log"
    return "\n--- server log ---\n" + log.read_text(errors="replace")[-3000:] if log.is_file() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated agent names: " + ", ".join(a.name for a in AGENTS))
    parser.add_argument("--timeout", type=float, default=300, help="seconds each agent may take (default 300)")
    args = parser.parse_args(argv)
    chosen = [a for a in AGENTS if not args.only or a.name in args.only.split(",")]
    install()
    failed = 0
    for agent in chosen:
        passed, seconds, problem = run(agent, args.timeout)
        print(f"{agent.name:12} {'PASS' if passed else 'FAIL'} {seconds:6.1f} s", flush=True)
        if not passed:
            failed += 1
            print(problem, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
