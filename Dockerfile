# syntax=docker/dockerfile:1
# tabby-fixed on ExLlamaV3, with the CUDA kernels compiled into the image.
#
# Build:  docker build -t tabby-fixed .            (--build-arg TORCH_CUDA_ARCH_LIST="9.0" builds faster
#                                                    for one GPU generation, e.g. H100/H200)
# Run:    docker run --gpus all -p 5000:5000 -v ./models:/app/models -v ./config.yml:/app/config.yml \
#             -v ./api_tokens.yml:/app/api_tokens.yml tabby-fixed
#
# torch from PyPI is a CUDA 13.0 build (host driver >= 580); the build and runtime images match it.

ARG CUDA_VERSION=13.0.1
ARG UBUNTU=ubuntu24.04

# ---- build: torch, exllamav3 and its kernels ---------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
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
RUN pip install --no-cache-dir "torch==${TORCH_VERSION}" "exllamav3==${EXLLAMAV3_VERSION}"
# Importing exllamav3 compiles its extension (no GPU needed once the arch list is set). The result
# is installed as a precompiled module, so the runtime image never recompiles; the last command
# fails the build if it would.
RUN TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST}" MAX_JOBS="${MAX_JOBS}" TORCH_EXTENSIONS_DIR=/tmp/ext \
        python -c "import exllamav3" \
    && cp /tmp/ext/exllamav3_ext/exllamav3_ext.so \
        "$(python -c 'import site, sysconfig; print(site.getsitepackages()[0] + "/exllamav3_ext" + sysconfig.get_config_var("EXT_SUFFIX"))')" \
    && rm -rf /tmp/ext \
    && python -c "import exllamav3.ext as ext; assert ext.is_precompiled_extension_available(), 'kernels would rebuild'"
COPY pyproject.toml README.md /src/
COPY tabby_fixed /src/tabby_fixed
RUN pip install --no-cache-dir /src

# ---- runtime -----------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# Triton compiles its launchers at first use: it needs a C compiler and the Python headers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-dev gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    TRITON_CACHE_DIR=/cache/triton \
    EXLLAMAV3_TUNE_CACHE=/cache/exllamav3
RUN useradd --create-home --uid 1000 tabby \
    && mkdir -p /app/models /cache/triton /cache/exllamav3 \
    && chown -R tabby:tabby /app /cache
WORKDIR /app
COPY --chown=tabby:tabby sampler_overrides /app/sampler_overrides
COPY --chown=tabby:tabby config_sample.yml /app/config_sample.yml
USER tabby
EXPOSE 5000
# Models, config.yml and api_tokens.yml are mounted at upstream TabbyAPI's paths; /cache keeps
# Triton and autotune results between restarts.
VOLUME ["/app/models", "/cache"]
HEALTHCHECK --interval=30s --timeout=10s --start-period=300s --retries=3 \
    CMD python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:5000/health', timeout=5)"
ENTRYPOINT ["tabby-fixed", "serve"]
CMD ["--host", "0.0.0.0"]
