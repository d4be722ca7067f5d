"""The image's structure, read with Docker's own Dockerfile parser (no Docker engine runs here, so
building and running the image is not verified by these tests; see the README)."""

from __future__ import annotations

from pathlib import Path

import dockerfile
import yaml

REPO = Path(__file__).resolve().parents[1]
ARCH_LIST = "8.0;8.6;8.9;9.0;10.0;12.0+PTX"


def stages() -> list[list[dockerfile.Command]]:
    parsed: list[list[dockerfile.Command]] = []
    for command in dockerfile.parse_file(str(REPO / "Dockerfile")):
        if command.cmd == "FROM":
            parsed.append([])
        if parsed:
            parsed[-1].append(command)
    return parsed


def find(stage: list[dockerfile.Command], cmd: str) -> list[dockerfile.Command]:
    return [c for c in stage if c.cmd == cmd]


def test_build_stage_compiles_the_kernels_for_the_arch_list():
    build, _ = stages()
    assert "-devel-" in build[0].value[0] and build[0].value[-1] == "build"
    args = {c.value[0].split("=", 1)[0]: c.value[0].split("=", 1)[1] for c in find(build, "ARG") if "=" in c.value[0]}
    assert args["TORCH_CUDA_ARCH_LIST"].strip('"') == ARCH_LIST
    runs = " ".join(" ".join(c.value) for c in find(build, "RUN"))
    assert "torch==${TORCH_VERSION}" in runs and "exllamav3==${EXLLAMAV3_VERSION}" in runs
    assert 'TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST}"' in runs and "import exllamav3" in runs
    assert "is_precompiled_extension_available()" in runs, "the build asserts that import never recompiles"


def test_runtime_stage_serves_like_upstream():
    _, runtime = stages()
    assert "-runtime-" in runtime[0].value[0]
    assert any("/opt/venv" in " ".join(c.value) for c in find(runtime, "COPY") if "--from=build" in c.flags)
    assert "python3-dev" in " ".join(" ".join(c.value) for c in find(runtime, "RUN")), "Triton needs the headers"
    assert find(runtime, "WORKDIR")[-1].value == ("/app",)
    assert find(runtime, "EXPOSE")[-1].value == ("5000",)
    volumes = " ".join(" ".join(c.value) for c in find(runtime, "VOLUME"))
    assert "/app/models" in volumes and "/cache" in volumes
    env = dict(pair for c in find(runtime, "ENV") for pair in zip(c.value[::2], c.value[1::2], strict=True))
    assert env["TRITON_CACHE_DIR"].startswith("/cache/") and env["EXLLAMAV3_TUNE_CACHE"].startswith("/cache/")
    (healthcheck,) = find(runtime, "HEALTHCHECK")
    assert "/health" in " ".join(healthcheck.value)
    users = find(runtime, "USER")
    assert users and users[-1].value[0] not in ("root", "0")
    assert find(runtime, "ENTRYPOINT")[-1].value == ("tabby-fixed", "serve")


def test_compose_mounts_upstreams_paths():
    service = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["tabby-fixed"]
    assert "5000:5000" in service["ports"]
    assert {"./models:/app/models", "./config.yml:/app/config.yml",
            "./api_tokens.yml:/app/api_tokens.yml"} <= set(service["volumes"])
    assert service["shm_size"] and service["ulimits"]["memlock"] == -1
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["capabilities"] == ["gpu"] and device["count"] == "all"


def test_the_image_context_leaves_out_local_state():
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", "models", "config.yml", "api_tokens.yml"} <= set(ignored)
