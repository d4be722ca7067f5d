"""The committed series for upstream TabbyAPI stands on its own: it must install and work wherever upstream
does, so no patch may import this project or add a dependency, and each one brings its own upstream tests.
(That it applies and passes through upstream's endpoint is `make upstream-check`, against upstream itself.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PATCHES = sorted((Path(__file__).resolve().parents[1] / "patches").glob("*.patch"))


def files_touched(patch: Path) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) ", patch.read_text(), re.MULTILINE)


def added_lines(patch: Path) -> list[str]:
    return [line[1:] for line in patch.read_text().splitlines() if line.startswith("+") and not line.startswith("+++")]


def test_there_is_a_series():
    assert len(PATCHES) >= 4


@pytest.mark.parametrize("patch", PATCHES, ids=[p.name for p in PATCHES])
def test_patch_imports_nothing_of_ours_and_adds_no_dependency(patch: Path):
    assert not [line for line in added_lines(patch) if "tabby_fixed" in line or "tabby-fixed" in line]
    dependency_files = {"pyproject.toml", "requirements.txt", "setup.py", "setup.cfg"}
    assert not [name for name in files_touched(patch) if Path(name).name in dependency_files]


@pytest.mark.parametrize("patch", PATCHES, ids=[p.name for p in PATCHES])
def test_patch_brings_tests_in_upstream_tests_folder(patch: Path):
    assert [name for name in files_touched(patch) if name.startswith("tests/test_")]


@pytest.mark.parametrize("patch", PATCHES, ids=[p.name for p in PATCHES])
def test_patch_subject_is_in_upstream_s_style(patch: Path):
    """Upstream's commits read "Area: Capitalized summary" (e.g. "Tools: Fix Harmony tool parsing")."""
    header = patch.read_text().split("\n\n", 1)[0]
    subject = re.search(r"^Subject: \[PATCH\] (.*(?:\n .*)*)", header, re.MULTILINE)
    assert subject and re.match(r"[A-Z]\w*: [A-Z]", subject.group(1))
