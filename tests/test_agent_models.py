"""The scripted models `make test-agents` runs the agents with: each answers the runner's task
with its agent's own tool, one file per turn, and ends on the next tool result. Checked here
without npm, so a change to the engine or the task text cannot break them unnoticed."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tabby_fixed.engine.base import GenerationParams, GenerationRequest, Step
from tabby_fixed.engine.scripted import ScriptedEngine
from tabby_fixed.toolcalls import ToolCallParser

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("agents_runner", ROOT / "scripts" / "agents.py")
agents = sys.modules["agents_runner"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(agents)

#: Each agent's tool: its name, path parameter, and how the written bytes appear in the arguments.
TOOLS = {
    "claude-code": ("Write", "file_path", lambda path, value: {"file_path": path, "content": value}),
    "qwen-code": ("write_file", "file_path", lambda path, value: {"file_path": path, "content": value}),
    "opencode": ("write", "filePath", lambda path, value: {"filePath": path, "content": value}),
    "codex": ("exec_command", "cmd", lambda path, value: {"cmd": f"printf '%s' '{value}' > {path}"}),
}


def answer(engine: ScriptedEngine, transcript: list[tuple[str, str]]) -> str:
    last_user = next(text for role, text in reversed(transcript) if role == "user")

    async def collect() -> str:
        job = await engine.generate(GenerationRequest("p", GenerationParams(), last_user, tuple(transcript)))
        return "".join([s.text async for s in job if isinstance(s, Step)])
    return asyncio.run(collect())


@pytest.mark.parametrize("name", [agent.name for agent in agents.AGENTS])
def test_each_agent_model_writes_both_files_then_stops(name, tmp_path):
    engine = ScriptedEngine(ROOT / "tests" / "agents" / "models" / name)
    tool, _, arguments = TOOLS[name]
    schema = {"type": "object", "properties": {key: {"type": "string"} for key in arguments("p", "v")}}
    parser = ToolCallParser("qwen3_coder", [{"type": "function", "function": {"name": tool, "parameters": schema}}])
    transcript = [("system", "You are an agent."), ("user", agents.task(tmp_path))]
    for file_name, content in agents.FILES.items():
        output = answer(engine, transcript)
        (call,) = parser.parse(output).tool_calls
        assert (call.name, call.arguments) == (tool, arguments(str(tmp_path / file_name), content.decode()))
        transcript += [("assistant", output), ("tool", json.dumps({"ok": True}))]
    assert answer(engine, transcript) == "Both files are written."
