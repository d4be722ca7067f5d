"""scripts/gpu-check's CPU side: its arguments and exit codes, --prepare's plan and manifest, the
converter's success read from its output files, kernel pieces, and a report that survives failures.
What it checks on a GPU is only verified on one (see README, "Checking on a GPU")."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check"


def load_script():
    loader = importlib.machinery.SourceFileLoader("gpu_check", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("gpu_check", loader))
    sys.modules["gpu_check"] = module  # its dataclasses look their module up
    loader.exec_module(module)
    return module


gpu_check = load_script()


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_help_describes_both_steps_and_the_exit_codes():
    result = run("--help")
    assert result.returncode == 0
    assert "--prepare" in result.stdout and "--model" in result.stdout and "3 no CUDA device" in result.stdout


def test_bad_arguments_are_a_usage_error():
    assert run().returncode == gpu_check.USAGE
    assert run("dir", "--tokens", "1").returncode == gpu_check.USAGE


def test_without_a_gpu_it_refuses_with_its_own_exit_code(tmp_path):
    result = run(str(tmp_path))
    assert result.returncode == gpu_check.NO_GPU == 3 and "no CUDA device" in result.stderr


def test_prepare_plans_wheels_for_the_device_python_pinned_to_the_tested_versions(tmp_path):
    folder = tmp_path / "carry"
    result = run("--prepare", "--dry-run", str(folder))
    assert result.returncode == 0, result.stderr
    command = result.stdout.splitlines()[0]
    assert "pip download" in command and "--python-version 3.12" in command and "--only-binary=:all:" in command
    manifest = json.loads((folder / "manifest.json").read_text())
    pinned = dict(requirement.split("==") for requirement in manifest["requirements"])
    assert set(pinned) == set(gpu_check.DEVICE_WHEELS) >= {"exllamav3", "llguidance", "fastapi", "uvicorn",
                                                           "pydantic", "jsonschema"}
    assert pinned["exllamav3"] == "1.6.5" and manifest["python"] == "3.12"
    assert "MiB" in result.stdout


def test_the_device_run_needs_a_prepared_folder(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert gpu_check.run_on_device(gpu_check.arguments([str(tmp_path)])) == gpu_check.NOT_PREPARED


def test_the_converter_is_judged_by_what_it_wrote(tmp_path):
    assert gpu_check.conversion_problem(tmp_path) == "no config.json"
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    assert "quantization_config" in gpu_check.conversion_problem(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "exl3"}}))
    assert gpu_check.conversion_problem(tmp_path) == "no quantization_config.json"
    (tmp_path / "quantization_config.json").write_text("{}")
    assert gpu_check.conversion_problem(tmp_path) == "no weights"
    (tmp_path / "model.safetensors").write_bytes(b"x")
    assert gpu_check.conversion_problem(tmp_path) is None


def test_built_kernels_come_back_in_pieces_and_are_joined_for_the_next_call(tmp_path, monkeypatch):
    built = tmp_path / "dir-build" / "exllamav3_ext" / "exllamav3_ext.so"
    built.parent.mkdir(parents=True)
    data = bytes(range(256)) * 4096
    built.write_bytes(data)
    monkeypatch.setattr(gpu_check, "PART_SIZE", 300_000)
    pieces = gpu_check.export_kernels(tmp_path / "dir", tmp_path / "out")
    assert len(pieces) == 4
    carried = tmp_path / "next" / "kernels"
    carried.mkdir(parents=True)
    for piece in pieces:
        (carried / piece).write_bytes((tmp_path / "out" / piece).read_bytes())
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("PYTHONPATH", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "TORCH_EXTENSIONS_DIR"):
        monkeypatch.setenv(name, "")
    gpu_check.kernel_environment(tmp_path / "next", (9, 0))
    (whole,) = [path for path in carried.iterdir() if ".part" not in path.name]
    assert whole.read_bytes() == data and whole.name.startswith("exllamav3_ext.cpython-")
    import os

    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "9.0" and sys.path[0] == str(carried)
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "next-build")


def test_a_failing_check_is_a_row_and_the_rest_still_run():
    report = gpu_check.Report(seconds=60)

    def broken() -> None:
        raise RuntimeError("CUDA error: out of memory")

    assert not gpu_check.attempt(report, "first", broken)
    assert gpu_check.attempt(report, "second", lambda: report.add("second", True, "fine"))
    assert report.rows[0][:2] == ("first", "FAIL") and "out of memory" in report.rows[0][3]
    assert report.rows[1][:2] == ("second", "ok") and report.failed


@pytest.mark.parametrize("left", [0.0, 5.0])
def test_a_check_that_would_start_after_the_budget_is_a_failed_row(left):
    report = gpu_check.Report(seconds=left)
    ran = []
    gpu_check.attempt(report, "late", lambda: ran.append(1), needs=10)
    assert not ran and report.rows == [("late", "FAIL", "not run", f"out of time ({left:.0f} s budget)")]
