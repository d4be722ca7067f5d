"""A wheel built from the package folder, installed into a fresh environment outside the checkout.

The environment sees the project's installed dependencies through a path line in a ``.pth`` file
(a path line adds the folder only; the ``.pth`` files inside it, such as the editable install's
finder that would lead back to the checkout, are not run), so a file missing from the wheel is
missing there too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from .processes import REPO


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def names(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())


def build_wheel(out: Path) -> Path:
    source = out / "src"
    shutil.copytree(REPO / "tabby_fixed", source / "tabby_fixed", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(out / "dist"), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (out / "dist").glob("tabby_fixed-*.whl")
    return wheel


def install_wheel(wheel: Path, venv: Path) -> None:
    """``pip install --no-deps WHEEL`` with the new venv's own pip; the dependencies are made visible
    afterwards, so pip never sees (or touches) the checkout's editable install."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    dependencies = [path for path in sys.path if Path(path).name == "site-packages"]
    (Path(site) / "project_dependencies.pth").write_text("".join(f"{path}\n" for path in dependencies))


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(root)
    install_wheel(wheel, root / "venv")
    return Installed(wheel, root / "venv")
