"""The image's runtime steps, replayed without Docker (none runs here; building and running the
real image is left to the CI workflow and to users, see the README).

The Dockerfile is read with Docker's own parser. The wheel is built from the files its build
stage copies and installed with pip, as that stage does; then its ENTRYPOINT + CMD, and upstream
TabbyAPI's compose ``command``, run from a folder laid out like ``/app`` with the demo model
mounted at the models path and a config.yml naming it, and its HEALTHCHECK (and upstream's curl
healthcheck) must pass. Container paths (/app, /cache, /tmp, /opt/venv) are mapped to temporary
folders, and the port to a free one.

As root, the replay keeps root (``PUID=0``): the interpreter here lives under /root, which no
other user can reach. The switch to an unprivileged user is tested on its own, up to the point
where the server would start.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dockerfile
import httpx
import pytest
import yaml

from tabby_fixed.bundled import DEMO_MODEL, DEMO_MODELS_DIR

from ..test_docker import stages
from .conftest import Installed
from .processes import REPO, free_port, last_line, running

FIXTURES = Path(__file__).parent / "fixtures"
IS_ROOT = os.geteuid() == 0


@dataclass(frozen=True)
class Image:
    """What the Dockerfile says about the image, stage by stage."""

    build_copies: set[str]
    build_runs: list[str]
    env: dict[str, str]
    workdir: str
    entrypoint: list[str]
    cmd: list[str]
    healthcheck: list[str]


def read_image() -> Image:
    build, runtime = stages()

    def last(stage: list[dockerfile.Command], cmd: str) -> dockerfile.Command:
        return [c for c in stage if c.cmd == cmd][-1]

    env = dict(pair for c in runtime if c.cmd == "ENV" for pair in zip(c.value[::2], c.value[1::2], strict=True))
    healthcheck = list(last(runtime, "HEALTHCHECK").value)
    return Image(
        build_copies={src for c in build if c.cmd == "COPY" and not c.flags for src in c.value[:-1]},
        build_runs=[" ".join(c.value) for c in build if c.cmd == "RUN"],
        env=env, workdir=last(runtime, "WORKDIR").value[0], entrypoint=list(last(runtime, "ENTRYPOINT").value),
        cmd=list(last(runtime, "CMD").value), healthcheck=healthcheck[healthcheck.index("CMD") + 1:])


@dataclass(frozen=True)
class Container:
    """A temporary root standing in for the container's file system."""

    root: Path
    venv: Path

    @property
    def app(self) -> Path:
        return self.root / "app"

    def path(self, value: str) -> str:
        """A container path (or PATH-like list) mapped into the temporary root."""
        places = {"/opt/venv": self.venv, "/app": self.app, "/cache": self.root / "cache", "/tmp": self.root / "tmp"}
        parts = []
        for part in value.split(":"):
            inside = next((p for p in places if part == p or part.startswith(p + "/")), None)
            parts.append(str(places[inside]) + part[len(inside):] if inside else part)
        return ":".join(parts).replace("$PATH", os.environ["PATH"])

    def env(self, image: Image, port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TABBY_") and k not in ("PYTHONPATH",)}
        env.update({name: self.path(value) for name, value in image.env.items()})
        env.update({"TABBY_NETWORK_PORT": str(port), **(extra or {})})
        if IS_ROOT:
            env.update({"PUID": "0", "PGID": "0"})
        return env


@pytest.fixture
def container(installed: Installed) -> Iterator[Container]:
    root = Path(tempfile.mkdtemp(prefix="tabby-container-"))
    root.chmod(0o755)
    (root / "tmp").mkdir()
    shutil.copytree(DEMO_MODELS_DIR / DEMO_MODEL, root / "app" / "models" / DEMO_MODEL)  # the models mount
    yield Container(root, installed.venv)
    shutil.rmtree(root, ignore_errors=True)


def upstream_service() -> dict:
    return yaml.safe_load((FIXTURES / "upstream-compose.yml").read_text())["services"]["tabbyapi"]


def test_the_build_stage_builds_the_wheel_from_the_package_files_alone():
    image = read_image()
    assert image.build_copies == {"pyproject.toml", "README.md", "tabby_fixed"}
    assert "pip install --no-cache-dir /src" in image.build_runs


def serve_and_check(container: Container, command: list[str], image: Image, extra_env: dict[str, str]) -> None:
    port = free_port()
    env = container.env(image, port, extra_env)
    (container.app / "config.yml").write_text(yaml.safe_dump({"model": {"model_name": DEMO_MODEL}}))
    with running(command, Path(container.path(image.workdir)), env, port, container.root / "server.log") as server:
        health = subprocess.run(image.healthcheck, env=env, cwd="/", capture_output=True, text=True, timeout=30)
        assert health.returncode == 0, health.stderr
        curl = [part.replace(":5000/", f":{port}/") for part in upstream_service()["healthcheck"]["test"][1:]]
        if shutil.which(curl[0]):
            assert subprocess.run(curl, capture_output=True, timeout=30).returncode == 0
        key = yaml.safe_load((container.app / "api_tokens.yml").read_text())["api_key"]
        models = httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {key}"}).json()
    assert [m["id"] for m in models["data"]] == [DEMO_MODEL]
    for variable in ("TRITON_CACHE_DIR", "EXLLAMAV3_TUNE_CACHE", "HOME"):
        assert Path(env[variable]).is_dir(), variable
    assert Path(env["TABBY_ADDRESS_FILE"]).read_text().strip() == f"http://127.0.0.1:{port}/health"


def test_the_images_entrypoint_and_cmd_serve_the_mounted_model(container):
    image = read_image()
    serve_and_check(container, [*image.entrypoint, *image.cmd], image, {})


def test_upstreams_compose_command_and_healthcheck_work_unchanged(container):
    image, service = read_image(), upstream_service()
    compose_env = dict(item.split("=", 1) for item in service["environment"])
    assert {"./models:/app/models", "./config.yml:/app/config.yml"} <= set(service["volumes"])
    serve_and_check(container, [*image.entrypoint, *service["command"]], image, compose_env)


def start_image(container: Container, image: Image) -> subprocess.CompletedProcess[str]:
    """The image's ENTRYPOINT + CMD, for a start that must fail before serving."""
    return subprocess.run([*image.entrypoint, *image.cmd], cwd=container.path(image.workdir),
                          env=container.env(image, free_port()), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", ["api_tokens.yml", "config.yml"])
def test_a_directory_mounted_where_a_file_belongs_is_one_line(container, name):
    image = read_image()
    (container.app / name).mkdir()
    result = start_image(container, image)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == last_line(result.stderr)
    assert f"{container.app / name} is a directory" in result.stderr and "Docker" in result.stderr


@pytest.mark.skipif(IS_ROOT, reason="root reads every file; see test_the_switch_to_an_unprivileged_user")
def test_an_unreadable_mounted_file_is_one_line(container):
    image = read_image()
    config = container.app / "config.yml"
    config.write_text("model: {}\n")
    config.chmod(0)
    result = start_image(container, image)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"cannot read the config file {config}" in last_line(result.stderr)


#: Runs the entry point as root with PUID/PGID set; it must switch user, then refuse the root-only
#: config.yml (so the server never starts), and report its uid for the test.
_SWITCH = """
import os, sys
from tabby_fixed import container
code = container.main(sys.argv[1:])
print(os.getuid(), os.getgid(), code)
"""


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_the_switch_to_an_unprivileged_user(container):
    image = read_image()
    config = container.app / "config.yml"
    config.write_text("model: {}\n")
    config.chmod(0o600)
    (container.root / "cache" / "triton").mkdir(parents=True)
    (container.root / "cache" / "triton" / "left-by-root").write_text("")
    env = {**container.env(image, free_port()), "PUID": "1000", "PGID": "1000", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", _SWITCH, "main.py", "--host", "0.0.0.0"],
                            cwd=container.path(image.workdir), env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["1000", "1000", "1"], result.stderr
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"runs as uid 1000 (gid 1000) and cannot read the config file {config}" in line
    assert "owner uid 0, mode 600" in line and "chown 1000:1000" in line and "PUID" in line
    for folder in ("cache/triton", "cache/triton/left-by-root", "cache/exllamav3", "cache/home", "app"):
        info = (container.root / folder).stat()
        assert (info.st_uid, info.st_gid) == (1000, 1000), folder
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and config.stat().st_uid == 0, "mounted files are not touched"
