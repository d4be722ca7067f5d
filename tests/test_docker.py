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


def build_args(stage: list[dockerfile.Command]) -> dict[str, str]:
    return {c.value[0].split("=", 1)[0]: c.value[0].split("=", 1)[1].strip('"')
            for c in find(stage, "ARG") if "=" in c.value[0]}


def test_one_build_argument_picks_the_cuda_version_of_both_images_and_of_torch():
    build, runtime = stages()
    commands = dockerfile.parse_file(str(REPO / "Dockerfile"))
    first_from = next(i for i, c in enumerate(commands) if c.cmd == "FROM")
    assert build_args(list(commands[:first_from]))["CUDA"] == "12.8.1", "upstream's default CUDA version"
    assert build[0].value[0] == "nvidia/cuda:${CUDA}-devel-${UBUNTU}"
    assert runtime[0].value[0] == "nvidia/cuda:${CUDA}-base-${UBUNTU}", "the smallest CUDA image; torch brings its libs"
    runs = " ".join(" ".join(c.value) for c in find(build, "RUN"))
    assert "download.pytorch.org/whl/${cuda_tag}" in runs and "torch.version.cuda == cuda" in runs


def test_build_stage_compiles_the_kernels_for_the_arch_list():
    build, _ = stages()
    assert "-devel-" in build[0].value[0] and build[0].value[-1] == "build"
    assert build_args(build)["TORCH_CUDA_ARCH_LIST"] == ARCH_LIST
    runs = " ".join(" ".join(c.value) for c in find(build, "RUN"))
    assert "torch==${TORCH_VERSION}" in runs and "exllamav3==${EXLLAMAV3_VERSION}" in runs
    assert 'TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST}"' in runs and "import exllamav3" in runs
    assert "is_precompiled_extension_available()" in runs, "the build asserts that import never recompiles"


def test_runtime_stage_serves_like_upstream():
    _, runtime = stages()
    assert any("/opt/venv" in " ".join(c.value) for c in find(runtime, "COPY") if "--from=build" in c.flags)
    packages = " ".join(" ".join(c.value) for c in find(runtime, "RUN"))
    assert "python3-dev" in packages, "Triton needs the headers"
    assert " curl " in packages, "upstream's compose healthcheck runs curl"
    assert find(runtime, "WORKDIR")[-1].value == ("/app",)
    assert find(runtime, "EXPOSE")[-1].value == ("5000",)
    volumes = " ".join(" ".join(c.value) for c in find(runtime, "VOLUME"))
    assert "/app/models" in volumes and "/cache" in volumes
    env = dict(pair for c in find(runtime, "ENV") for pair in zip(c.value[::2], c.value[1::2], strict=True))
    assert env["TRITON_CACHE_DIR"].startswith("/cache/") and env["EXLLAMAV3_TUNE_CACHE"].startswith("/cache/")
    assert env["PUID"] == env["PGID"] == "1000"
    (healthcheck,) = find(runtime, "HEALTHCHECK")
    assert healthcheck.value[-2:] == ("tabby-fixed", "health")
    assert not find(runtime, "USER"), "the entry point starts as root and switches to PUID:PGID itself"
    assert find(runtime, "ENTRYPOINT")[-1].value == ("tabby-fixed-container",)


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
