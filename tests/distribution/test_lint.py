"""The Dockerfile and the CI workflows pass their linters (hadolint, actionlint: binaries from the
`test` extra's wheels), with the exceptions written down in .hadolint.yaml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .processes import REPO

BIN = Path(sys.executable).parent


@pytest.mark.parametrize("command", [["hadolint", "Dockerfile"], ["actionlint", "-no-color"]],
                         ids=["hadolint", "actionlint"])
def test_the_linter_finds_nothing(command):
    result = subprocess.run([str(BIN / command[0]), *command[1:]], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_workflow_publishes_both_variants_only_after_the_checks():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "image.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["push"]["tags"] == ["v*"] and triggers["schedule"]
    assert {"pyproject.toml", "Dockerfile"} <= set(triggers["push"]["paths"])
    checks = " ".join(step.get("run", "") for step in workflow["jobs"]["checks"]["steps"])
    assert "make test" in checks and "make rebase" in checks and "make upstream-check" in checks
    assert "test_docker_replay.py" in checks
    image = workflow["jobs"]["image"]
    assert image["needs"] == "checks" and image["strategy"]["matrix"]["cuda"] == ["12.8.1", "13.0.1"]
