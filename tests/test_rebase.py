"""``make rebase`` against a stand-in upstream: a small git repository with its own minimal files
at upstream TabbyAPI's paths and the same function signatures, and a patch series made against it
the way ours is made against the real one (the real series is verified against upstream itself;
see upstream/UPSTREAM.toml and the README)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).resolve().parent.parent
FORMATS = ("qwen3_coder", "glm4_5", "minimax_m2")

FILES = {
    "common/logger.py": "class _Quiet:\n    def __getattr__(self, name):\n        return lambda *a, **k: None\n\n\n"
                        "xlogger = _Quiet()\n",
    "endpoints/OAI/types/tools.py": "from pydantic import BaseModel\n\n\nclass Tool(BaseModel):\n    name: str\n"
                                    "    arguments: str\n\n\nclass ToolCall(BaseModel):\n    function: Tool\n",
    "endpoints/OAI/utils/tools.py": (
        "from endpoints.OAI.utils.toolcall_formats import qwen3_coder, glm4_5, minimax_m2\n\n"
        "ALL_TOOLCALL_FORMATS = {'qwen3_coder': qwen3_coder, 'glm4_5': glm4_5, 'minimax_m2': minimax_m2}\n\n\n"
        "def parse_toolcalls(tool_calls_str: str, tool_format: str):\n"
        "    parser = ALL_TOOLCALL_FORMATS[tool_format]\n"
        "    return parser.parse_toolcalls(tool_calls_str)\n"),
    "endpoints/OAI/utils/chat_completion.py": (
        "from endpoints.OAI.utils.tools import parse_toolcalls\n\n\n"
        "def _parse_tool_calls(text: str, tool_format: str, request_id: str) -> list:\n"
        "    return [p.model_dump() for p in parse_toolcalls(text, tool_format)]\n"),
    "pyproject.toml": '[project]\nname = "stand-in"\ndependencies = [\n    "pydantic",\n]\n',
    **{f"endpoints/OAI/utils/toolcall_formats/{name}.py": (
        "import json\nfrom endpoints.OAI.types.tools import ToolCall, Tool\n\n\n"
        "def parse_toolcalls(text: str) -> list[ToolCall]:\n"
        "    return []\n") for name in FORMATS},
}


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout


def edit(folder: Path, path: str, old: str, new: str) -> None:
    file = folder / path
    text = file.read_text()
    assert old in text, (path, old)
    file.write_text(text.replace(old, new, 1))


def make_series(upstream: Path, patches: Path) -> None:
    """The series, made as ours is: commits on a clone, then git format-patch."""
    work = upstream.parent / "series-work"
    subprocess.run(["git", "clone", "-q", str(upstream), str(work)], check=True)
    base = git(work, "rev-parse", "HEAD").strip()
    edit(work, "endpoints/OAI/utils/tools.py", "def parse_toolcalls(tool_calls_str: str, tool_format: str):\n",
         "def parse_toolcalls(tool_calls_str: str, tool_format: str, tools=None):\n")
    edit(work, "endpoints/OAI/utils/tools.py", "    return parser.parse_toolcalls(tool_calls_str)\n",
         "    if tools:\n        return parser.parse_toolcalls(tool_calls_str, tools=tools)\n"
         "    return parser.parse_toolcalls(tool_calls_str)\n")
    git(work, "commit", "-qam", "Tools: hand the request's tool schemas to the parser")
    for name in FORMATS:
        edit(work, f"endpoints/OAI/utils/toolcall_formats/{name}.py",
             "def parse_toolcalls(text: str) -> list[ToolCall]:\n",
             "def parse_toolcalls(text: str, tools: list | None = None) -> list[ToolCall]:\n    if tools:\n"
             "        from tabby_fixed.adapters.tabbyapi import parse_toolcalls as parse_by_schema\n\n"
             f'        return parse_by_schema("{name}", text, tools)\n')
    git(work, "commit", "-qam", "Tools: type arguments by the tool schemas")
    git(work, "format-patch", "-q", "--no-signature", "--zero-commit", "-N", "-o", str(patches), f"{base}..HEAD")


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(our checkout stand-in, the stand-in upstream repository)."""
    upstream = tmp_path / "upstream-repo"
    for path, text in FILES.items():
        (upstream / path).parent.mkdir(parents=True, exist_ok=True)
        (upstream / path).write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main", str(upstream)], check=True)
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "stand-in upstream")
    ours = tmp_path / "ours"
    (ours / "scripts").mkdir(parents=True)
    (ours / "upstream").mkdir()
    shutil.copy(REPO / "Makefile", ours / "Makefile")
    shutil.copy(REPO / "scripts" / "upstream.py", ours / "scripts" / "upstream.py")
    shutil.copy(REPO / "pyproject.toml", ours / "pyproject.toml")
    os.utime(ours / "pyproject.toml", (0, 0))  # older than the test venv: make does not reinstall
    (ours / "upstream" / "UPSTREAM.toml").write_text(
        f'repository = "{upstream}"\nbranch = "main"\ncommit = "unknown"\ndate = "unknown"\n')
    make_series(upstream, ours / "patches")
    return ours, upstream


def make(ours: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(ours), f"VENV={VENV}", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_rebase_applies_the_series_and_checks_it(workspace):
    ours, upstream = workspace
    result = make(ours, "rebase")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Applied 2 patches" in result.stdout and "25 of 25 conformance cases pass" in result.stdout
    head = git(upstream, "rev-parse", "HEAD").strip()
    assert f'commit = "{head}"' in (ours / "upstream" / "UPSTREAM.toml").read_text()
    assert f'repository = "{upstream}"' in (ours / "upstream" / "UPSTREAM.toml").read_text()


def test_rebase_refreshes_patches_after_upstream_shifts_their_context(workspace):
    ours, upstream = workspace
    before = {p.name: p.read_text() for p in (ours / "patches").glob("*.patch")}
    for name in FORMATS:
        edit(upstream, f"endpoints/OAI/utils/toolcall_formats/{name}.py", "import json\n",
             "import json\nimport re\n\n# Upstream grew a header here.\nLIMIT = 10\n")
    git(upstream, "commit", "-qam", "upstream moves things around")
    result = make(ours, "rebase", "UPSTREAM_URL=" + str(upstream))
    assert result.returncode == 0, result.stdout + result.stderr
    after = {p.name: p.read_text() for p in (ours / "patches").glob("*.patch")}
    assert after.keys() == before.keys()
    assert after["0001-Tools-hand-the-request-s-tool-schemas-to-the-parser.patch"] == \
        before["0001-Tools-hand-the-request-s-tool-schemas-to-the-parser.patch"]
    changed = "0002-Tools-type-arguments-by-the-tool-schemas.patch"

    def hunks(text: str) -> list[str]:
        return [line.split("@@")[1] for line in text.splitlines() if line.startswith("@@")]

    assert hunks(after[changed]) != hunks(before[changed]), "hunk positions follow upstream's new lines"
    assert make(ours, "rebase").returncode == 0, "the refreshed series applies cleanly again"


def test_rebase_stops_on_a_conflict_with_the_commands_to_finish(workspace):
    ours, upstream = workspace
    edit(upstream, "endpoints/OAI/utils/toolcall_formats/qwen3_coder.py",
         "def parse_toolcalls(text: str) -> list[ToolCall]:\n    return []\n",
         "def parse_toolcalls(text: str, strict: bool = False) -> list[ToolCall]:\n    return [] if strict else []\n")
    git(upstream, "commit", "-qam", "upstream changes the signature")
    result = make(ours, "rebase")
    assert result.returncode != 0
    report = result.stderr
    assert "0002-Tools-type-arguments-by-the-tool-schemas.patch does not apply" in report
    assert "endpoints/OAI/utils/toolcall_formats/qwen3_coder.py" in report
    assert "make rebase-continue" in report and "am --abort" in report
    checkout = ours / "upstream" / "src"
    assert (checkout / ".git" / "rebase-apply").is_dir(), "the checkout is left mid-merge to resolve"

    resolved = FILES["endpoints/OAI/utils/toolcall_formats/qwen3_coder.py"].replace(
        "def parse_toolcalls(text: str) -> list[ToolCall]:\n    return []\n",
        "def parse_toolcalls(text: str, strict: bool = False, tools: list | None = None) -> list[ToolCall]:\n"
        "    if tools:\n        from tabby_fixed.adapters.tabbyapi import parse_toolcalls as parse_by_schema\n\n"
        '        return parse_by_schema("qwen3_coder", text, tools)\n    return [] if strict else []\n')
    (checkout / "endpoints/OAI/utils/toolcall_formats/qwen3_coder.py").write_text(resolved)
    git(checkout, "add", "-A")
    finished = make(ours, "rebase-continue")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "strict: bool = False, tools" in (ours / "patches" / "0002-Tools-type-arguments-by-the-tool-schemas.patch"
                                              ).read_text()
