# syntax=docker/dockerfile:1
# tabby-fixed on ExLlamaV3, with the CUDA kernels compiled into the image. A drop-in for upstream
# TabbyAPI's image: same port, paths and command line (see README, "Docker").
#
# Build:  make image                        (CUDA=13.0 for the CUDA 13.0 variant, ARCHS="9.0" for one GPU
#                                             generation, e.g. H100/H200: much faster to build)
# Run:    docker compose up                 (upstream's docker-compose.yml works with this image's name)
#
# CUDA 12.8 needs host driver >= 570, CUDA 13.0 needs >= 580. torch comes from PyTorch's index for
# that CUDA version, so the kernels, torch and the driver agree.

ARG CUDA=12.8.1
ARG UBUNTU=ubuntu24.04

# ---- build: torch, exllamav3 and its kernels ---------------------------------------------------
FROM nvidia/cuda:${CUDA}-devel-${UBUNTU} AS build
ARG CUDA
ARG TORCH_VERSION=2.14.1
ARG EXLLAMAV3_VERSION=1.6.5
ARG TORCH_CUDA_ARCH_LIST="8.0;8.6;8.9;9.0;10.0;12.0+PTX"
ARG MAX_JOBS=8
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential ninja-build \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# torch's own index for this CUDA version (cu128, cu130); the check stops a build whose torch was
# made for another CUDA version, which would need another host driver.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN cuda_tag="cu$(echo "${CUDA}" | cut -d. -f1,2 | tr -d .)" \
    && pip install --no-cache-dir --index-url "https://download.pytorch.org/whl/${cuda_tag}" "torch==${TORCH_VERSION}" \
    && pip install --no-cache-dir "exllamav3==${EXLLAMAV3_VERSION}" \
    && python -c "import sys, torch; cuda = '.'.join(sys.argv[1].split('.')[:2]); \
assert torch.version.cuda == cuda, f'torch is built for CUDA {torch.version.cuda}, not {cuda}'" "${CUDA}"
# Importing exllamav3 compiles its extension (no GPU needed once the arch list is set). The result
# is installed as a precompiled module, so the runtime image never recompiles; the last command
# fails the build if it would.
RUN TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST}" MAX_JOBS="${MAX_JOBS}" TORCH_EXTENSIONS_DIR=/tmp/ext \
        python -c "import exllamav3" \
    && cp /tmp/ext/exllamav3_ext/exllamav3_ext.so \
        "$(python -c 'import site, sysconfig; print(site.getsitepackages()[0] + "/exllamav3_ext" + sysconfig.get_config_var("EXT_SUFFIX"))')" \
    && rm -rf /tmp/ext \
    && python -c "import exllamav3.ext as ext; assert ext.is_precompiled_extension_available(), 'kernels would rebuild'"
# The package as a wheel: these are the files the wheel is built from (tests/distribution replays this).
COPY pyproject.toml README.md /src/
COPY tabby_fixed /src/tabby_fixed
RUN pip install --no-cache-dir /src

# ---- runtime: CUDA's smallest image; torch's wheels bring their own CUDA libraries ---------------
FROM nvidia/cuda:${CUDA}-base-${UBUNTU} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# Triton compiles its launchers at first use: it needs a C compiler and the Python headers. curl
# is there for upstream's compose healthcheck (curl -f http://127.0.0.1:5000/health).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-dev gcc libc6-dev curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/venv /opt/venv
# PUID/PGID: the unprivileged user the entry point switches to after preparing /cache.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PUID=1000 \
    PGID=1000 \
    HOME=/cache/home \
    TRITON_CACHE_DIR=/cache/triton \
    EXLLAMAV3_TUNE_CACHE=/cache/exllamav3 \
    TABBY_ADDRESS_FILE=/tmp/tabby-fixed.address
WORKDIR /app
RUN mkdir -p /app/models /cache
COPY config_sample.yml /app/config_sample.yml
EXPOSE 5000
# Models, config.yml and api_tokens.yml are mounted at upstream TabbyAPI's paths; /cache keeps
# Triton and autotune results between restarts.
VOLUME ["/app/models", "/cache"]
# tabby-fixed health follows the port the server listens on, wherever it was configured.
HEALTHCHECK --interval=30s --timeout=10s --start-period=300s --retries=3 CMD ["tabby-fixed", "health"]
# Starts as root only to prepare /cache, then runs the server as PUID:PGID; accepts upstream's
# command line (main.py and its flags) as well as tabby-fixed's.
ENTRYPOINT ["tabby-fixed-container"]
CMD ["--host", "0.0.0.0"]
