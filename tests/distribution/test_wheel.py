"""The wheel alone serves: installed outside the checkout and started from an empty folder, it
finds its chat template, a shipped preset and the demo model."""

from __future__ import annotations

import subprocess

import openai

from .conftest import Installed
from .processes import REPO, checkout_env, free_port, running

WRITE_FILE = {"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}

#: Every folder on sys.path that holds a tabby_fixed package, and any finder that leads elsewhere.
FIND_PACKAGE = ("import os, sys; print(*[p for p in sys.path if os.path.isdir(os.path.join(p, 'tabby_fixed'))], "
                "*[f for f in sys.meta_path if 'editable' in repr(f)])")


def test_the_wheel_carries_every_file_of_the_package(installed: Installed):
    folder = REPO / "tabby_fixed"
    files = {p.relative_to(REPO).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert files - installed.names() == set()
    assert {"tabby_fixed/engine/chatml_tools.jinja", "tabby_fixed/sampler_overrides/safe_defaults.yml",
            "tabby_fixed/examples/models/demo/scripted.yml"} <= installed.names()


def test_the_top_level_folders_are_the_packages_own(installed: Installed):
    assert (REPO / "sampler_overrides").resolve() == (REPO / "tabby_fixed" / "sampler_overrides").resolve()
    assert (REPO / "examples").resolve() == (REPO / "tabby_fixed" / "examples").resolve()


def test_the_installed_wheel_serves_the_demo_with_a_shipped_preset_from_an_empty_folder(installed, tmp_path):
    env = {k: v for k, v in checkout_env().items() if k != "PYTHONPATH"}
    where = subprocess.run([str(installed.bin / "python"), "-c", FIND_PACKAGE], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout.split()
    assert len(where) == 1 and where[0].startswith(str(installed.venv)), "only the wheel's copy may be importable"
    port = free_port()
    command = [str(installed.bin / "tabby-fixed"), "serve", "--demo", "--port", str(port),
               "--override-preset", "qwen3_coder"]
    with running(command, tmp_path, env, port, tmp_path.parent / f"{tmp_path.name}.log") as server:
        key = (tmp_path / "api_tokens.yml").read_text().split("api_key: ")[1].split()[0]
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=30)
        raw = client.chat.completions.with_raw_response.create(
            model="demo", tools=[WRITE_FILE],
            messages=[{"role": "user", "content": "write notes.txt containing exactly: 123"}])
        output = server.output()
    (call,) = raw.parse().choices[0].message.tool_calls
    assert call.function.name == "write_file"
    assert call.function.arguments == '{"path": "notes.txt", "content": "123"}'
    assert "forced=" in raw.headers["x-sampler-source"] and "top_k:20" in raw.headers["x-sampler-source"]
    assert "sampler preset: qwen3_coder" in output and f"API keys: {tmp_path / 'api_tokens.yml'}" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["api_tokens.yml"]
