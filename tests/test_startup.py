"""Start-up settings applied to the process: the CUDA allocator, the priority, the warning line."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tabby_fixed.config import TabbyConfig
from tabby_fixed.startup import ASYNC_ALLOCATOR, raise_priority, set_allocator

ROOT = Path(__file__).resolve().parent.parent


def test_cuda_malloc_async_is_set_before_torch_is_imported(tmp_path: Path) -> None:
    # A fresh interpreter runs the CLI's start-up up to the server import: torch must not be
    # imported yet, and it must then see the allocator setting.
    script = ("import sys; from tabby_fixed.config import load_config; from tabby_fixed.startup import prepare_process;"
              "prepare_process(load_config([])); import torch, os;"
              "print(os.environ['PYTORCH_CUDA_ALLOC_CONF'], os.environ['PYTORCH_ALLOC_CONF'])")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTORCH_", "TABBY_"))}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == [ASYNC_ALLOCATOR, ASYNC_ALLOCATOR], done.stderr


def test_cuda_malloc_async_off_leaves_the_environment_alone() -> None:
    environ = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    set_allocator(TabbyConfig.model_validate({"memory": {"cuda_malloc_async": False}}), environ)
    assert environ == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def test_allocator_after_torch_import_says_it_had_no_effect(caplog: pytest.LogCaptureFixture) -> None:
    import torch  # noqa: F401  (already imported by other tests; made certain here)

    environ: dict[str, str] = {}
    with caplog.at_level(logging.INFO, logger="tabby_fixed.startup"):
        set_allocator(TabbyConfig(), environ)
    assert environ["PYTORCH_CUDA_ALLOC_CONF"] == ASYNC_ALLOCATOR
    assert "torch was imported before the config was read" in caplog.text


def test_realtime_priority_raises_or_says_why_not(caplog: pytest.LogCaptureFixture) -> None:
    script = ("import logging, os; logging.basicConfig(level='INFO');"
              "from tabby_fixed.config import TabbyConfig; from tabby_fixed.startup import raise_priority;"
              "raise_priority(TabbyConfig.model_validate({'developer': {'realtime_process_priority': True}}));"
              "print(os.getpriority(os.PRIO_PROCESS, 0))")
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    niceness = int(done.stdout.strip())
    if niceness < os.getpriority(os.PRIO_PROCESS, 0):
        assert "niceness set to" in done.stderr
    else:
        assert "not permitted to raise the priority" in done.stderr
    with caplog.at_level(logging.INFO, logger="tabby_fixed.startup"):
        raise_priority(TabbyConfig())
    assert caplog.records == []
