"""scripts/gpu-check runs only on a GPU machine; here it must explain itself and refuse clearly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_help_describes_the_checks():
    result = run("--help")
    assert result.returncode == 0 and "--model" in result.stdout


def test_without_a_gpu_it_refuses_with_a_reason():
    result = run()
    assert result.returncode == 2 and "no CUDA device" in result.stderr
