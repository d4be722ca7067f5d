"""``make rebase`` / ``rebase-continue`` / ``rebase-skip`` / ``upstream-check`` against a stand-in upstream: a
small git repository with its own minimal files at upstream TabbyAPI's paths, and a two-patch series made
against it the way ours is made against the real one. The check is replaced by a command
(``UPSTREAM_CHECK``) that looks at the patched checkout; the real check, upstream's own endpoint, is run
against the real upstream snapshot (see the README).
"""

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
DISPATCH = "endpoints/OAI/utils/tools.py"
QWEN = "endpoints/OAI/utils/toolcall_formats/qwen3_coder.py"
FIRST = "0001-Tools-hand-the-request-s-tool-schemas-to-the-parser.patch"
SECOND = "0002-Tools-type-arguments-by-the-tool-schemas.patch"
# The check: the patched dispatcher forwards tools (fails on stock and on a series that lost patch 1).
PATCHED = "grep -q 'tools=tools' " + DISPATCH

FILES = {
    DISPATCH: ("from endpoints.OAI.utils.toolcall_formats import qwen3_coder, glm4_5, minimax_m2\n\n"
               "ALL_TOOLCALL_FORMATS = {'qwen3_coder': qwen3_coder, 'glm4_5': glm4_5, 'minimax_m2': minimax_m2}\n\n\n"
               "def parse_toolcalls(tool_calls_str: str, tool_format: str):\n"
               "    parser = ALL_TOOLCALL_FORMATS[tool_format]\n"
               "    return parser.parse_toolcalls(tool_calls_str)\n"),
    **{f"endpoints/OAI/utils/toolcall_formats/{name}.py": (
        "import json\n\n\ndef parse_toolcalls(text: str) -> list:\n    return []\n") for name in FORMATS},
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
    edit(work, DISPATCH, "def parse_toolcalls(tool_calls_str: str, tool_format: str):\n",
         "def parse_toolcalls(tool_calls_str: str, tool_format: str, tools=None):\n")
    edit(work, DISPATCH, "    return parser.parse_toolcalls(tool_calls_str)\n",
         "    return parser.parse_toolcalls(tool_calls_str, tools=tools)\n")
    git(work, "commit", "-qam", "Tools: hand the request's tool schemas to the parser")
    for name in FORMATS:
        edit(work, f"endpoints/OAI/utils/toolcall_formats/{name}.py",
             "def parse_toolcalls(text: str) -> list:\n",
             "def parse_toolcalls(text: str, tools=None) -> list:\n    types = {t['name']: t for t in tools or []}\n")
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


def make(ours: Path, *args: str, check: str = PATCHED) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(ours), f"VENV={VENV}", f"UPSTREAM_CHECK={check}", *args],
                          capture_output=True, text=True)


def snapshot(ours: Path) -> dict[str, str]:
    """patches/ and the pin, to show they did not change."""
    files = [*sorted((ours / "patches").glob("*.patch")), ours / "upstream" / "UPSTREAM.toml"]
    return {f.name: f.read_text() for f in files}


def conflict_in_second_patch(upstream: Path) -> None:
    edit(upstream, QWEN, "def parse_toolcalls(text: str) -> list:\n    return []\n",
         "def parse_toolcalls(text: str, strict: bool = False) -> list:\n    return [] if strict else []\n")
    git(upstream, "commit", "-qam", "upstream changes the signature")


def test_rebase_applies_the_series_and_checks_it(workspace):
    ours, upstream = workspace
    result = make(ours, "rebase")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Applied 2 patches" in result.stdout
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
    assert after[FIRST] == before[FIRST]

    def hunks(text: str) -> list[str]:
        return [line.split("@@")[1] for line in text.splitlines() if line.startswith("@@")]

    assert hunks(after[SECOND]) != hunks(before[SECOND]), "hunk positions follow upstream's new lines"
    assert make(ours, "rebase").returncode == 0, "the refreshed series applies cleanly again"


def test_a_failing_check_leaves_patches_and_pin_alone(workspace):
    ours, upstream = workspace
    edit(upstream, QWEN, "import json\n", "import json\nimport re\n")
    git(upstream, "commit", "-qam", "upstream shifts context")
    before = snapshot(ours)
    result = make(ours, "rebase", check="false")
    assert result.returncode != 0
    assert "The check failed" in result.stderr and "unchanged" in result.stderr
    assert snapshot(ours) == before


def test_rebase_stops_on_a_conflict_with_the_commands_to_finish(workspace):
    ours, upstream = workspace
    conflict_in_second_patch(upstream)
    before = snapshot(ours)
    result = make(ours, "rebase")
    assert result.returncode != 0
    report = result.stderr
    assert f"{SECOND} does not apply" in report
    assert "  | " in report and "Patch failed at 0002" in report, "git's own message is relayed"
    assert f"{QWEN}: both changed" in report
    assert "make rebase-continue" in report and "make rebase-skip" in report and "am --abort" in report
    assert snapshot(ours) == before
    checkout = ours / "upstream" / "src"
    assert (checkout / ".git" / "rebase-apply").is_dir(), "the checkout is left mid-merge to resolve"

    (checkout / QWEN).write_text(
        "import json\n\n\ndef parse_toolcalls(text: str, strict: bool = False, tools=None) -> list:\n"
        "    types = {t['name']: t for t in tools or []}\n    return [] if strict else []\n")
    git(checkout, "add", QWEN)
    finished = make(ours, "rebase-continue")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "strict: bool = False, tools" in (ours / "patches" / SECOND).read_text()
    assert git(upstream, "rev-parse", "HEAD").strip() in (ours / "upstream" / "UPSTREAM.toml").read_text()


def test_rebase_skip_says_what_it_drops_and_the_series_shrinks_by_that_only(workspace):
    ours, upstream = workspace
    conflict_in_second_patch(upstream)
    assert make(ours, "rebase").returncode != 0
    result = make(ours, "rebase-skip")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f'Dropping {SECOND}: "Tools: type arguments by the tool schemas"' in result.stdout
    assert f"(dropped: {SECOND})" in result.stdout
    assert [p.name for p in (ours / "patches").glob("*.patch")] == [FIRST]


def test_a_patch_skipped_behind_make_s_back_is_refused(workspace):
    """`git am --skip` run by hand, then rebase-continue: the series would lose a patch, so nothing is written."""
    ours, upstream = workspace
    edit(upstream, DISPATCH, "    return parser.parse_toolcalls(tool_calls_str)\n",
         "    return parser.parse_toolcalls(tool_calls_str.strip())\n")
    git(upstream, "commit", "-qam", "upstream changes the dispatcher")
    conflict_in_second_patch(upstream)
    before = snapshot(ours)
    assert make(ours, "rebase").returncode != 0
    checkout = ours / "upstream" / "src"
    subprocess.run(["git", "-C", str(checkout), "am", "--skip"], capture_output=True)  # stops at patch 2
    (checkout / QWEN).write_text("def parse_toolcalls(text, strict=False, tools=None):\n    return []\n")
    git(checkout, "add", QWEN)
    result = make(ours, "rebase-continue", check="true")
    assert result.returncode != 0
    assert "The series had 2 patches" in result.stderr and FIRST in result.stderr
    assert snapshot(ours) == before


def test_deleted_upstream_conflict_names_the_file_and_both_ways_out(workspace):
    ours, upstream = workspace
    git(upstream, "rm", "-q", "endpoints/OAI/utils/toolcall_formats/minimax_m2.py")
    git(upstream, "commit", "-qm", "upstream drops minimax")
    result = make(ours, "rebase")
    assert result.returncode != 0
    report = result.stderr
    minimax = "endpoints/OAI/utils/toolcall_formats/minimax_m2.py"
    assert f"{minimax}: deleted upstream, changed by the patch" in report
    checkout = ours / "upstream" / "src"
    for line in report.splitlines():
        if " add " in line and line.strip().startswith("git -C"):
            for name in line.split(" add ", 1)[1].split():
                assert (checkout / name).exists(), f"`git add` advised for {name}, which is not in the tree"
    assert f"rm {minimax}" in report
    git(checkout, "rm", "-q", minimax)
    finished = make(ours, "rebase-continue")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "minimax_m2.py" not in (ours / "patches" / SECOND).read_text()


def test_a_patch_left_empty_by_the_resolution_is_reported_once_with_git_s_words(workspace):
    ours, upstream = workspace
    conflict_in_second_patch(upstream)
    assert make(ours, "rebase").returncode != 0
    checkout = ours / "upstream" / "src"
    git(checkout, "checkout", "HEAD", "--", ".")  # keep upstream's side everywhere: the patch has nothing left
    result = make(ours, "rebase-continue")
    assert result.returncode != 0
    report = result.stderr
    assert "  | No changes" in report, "git's own message is relayed"
    assert "Nothing is left of this patch" in report and "make rebase-skip" in report
    assert report.count("does not apply") == 1
    skipped = make(ours, "rebase-skip")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert [p.name for p in (ours / "patches").glob("*.patch")] == [FIRST]


def test_upstream_check_applies_the_committed_series_at_the_pin(workspace):
    ours, upstream = workspace
    assert make(ours, "rebase").returncode == 0
    conflict_in_second_patch(upstream)  # upstream moves on; the pin does not
    result = make(ours, "upstream-check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Applied 2 patches to the pinned commit" in result.stdout
    failing = make(ours, "upstream-check", check="false")
    assert failing.returncode != 0
