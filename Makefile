# `make test` is the one command CI runs (.ci/run): it builds the virtual environment it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test test-agents lint typecheck bench serve probe rebase rebase-continue upstream-check clean rebase-skip image

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

lint: $(VENV)/.installed
	$(BIN)/ruff check tabby_fixed tests bench scripts

# mypy's settings (strict on toolcalls/ and the pipeline) are in pyproject.toml.
typecheck: $(VENV)/.installed
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest tabby_fixed tests

# OpenCode, Qwen Code, Claude Code and Codex CLI (pinned in tests/agents/, installed from npm into
# .agents/) run headless against scripted models; each must write two files byte for byte and exit.
test-agents: $(VENV)/.installed
	$(BIN)/python scripts/agents.py $(if $(AGENTS),--only $(AGENTS))

# With a config.yml here, serve what it says; without one, the scripted demo model on port 5000.
# Installs only what serving needs; ENGINE=exllamav3 adds the engine for real models, PORT=5001
# another port.
ENGINE ?=
PORT ?=
ifneq ($(filter-out exllamav3,$(ENGINE)),)
$(error ENGINE=$(ENGINE): the engines to install are exllamav3, or none for the scripted demo)
endif
SERVE_STAMP := $(VENV)/.serve-$(or $(ENGINE),base)

$(SERVE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.$(if $(ENGINE),[$(ENGINE)])'
	touch $@

serve: $(SERVE_STAMP)
	$(BIN)/tabby-fixed serve $(if $(wildcard config.yml),,--demo) $(if $(PORT),--port $(PORT))

# Start the demo model on a spare port, probe it, stop it: the tool-argument check on any machine.
PROBE_PORT ?= 5055
probe: $(SERVE_STAMP)
	@$(BIN)/tabby-fixed serve --demo --port $(PROBE_PORT) \
		--disable-auth true > .probe-server.log 2>&1 & server=$$!; \
	trap "kill $$server" EXIT; \
	$(BIN)/tabby-fixed probe --base-url http://127.0.0.1:$(PROBE_PORT)/v1 --model demo --wait 60

# The container image (README, "Docker"): CUDA=13.0.1 for the CUDA 13.0 variant (host driver >= 580),
# ARCHS for the GPU generations to compile kernels for (one, e.g. ARCHS=9.0, builds much faster).
CUDA ?= 12.8.1
ARCHS ?= 8.0;8.6;8.9;9.0;10.0;12.0+PTX
IMAGE ?= tabby-fixed:cu$(subst .,,$(basename $(CUDA)))
image:
	docker build --build-arg CUDA=$(CUDA) --build-arg "TORCH_CUDA_ARCH_LIST=$(ARCHS)" -t $(IMAGE) .

# The patch series for upstream TabbyAPI (see README, "Staying on upstream TabbyAPI").
# UPSTREAM_URL: a git URL or path to fetch upstream from; UPSTREAM_CHECK: a command replacing the check.
UPSTREAM_VENV ?= .upstream-venv
UPSTREAM_ARGS = --venv $(UPSTREAM_VENV) $(if $(UPSTREAM_URL),--url '$(UPSTREAM_URL)') \
	$(if $(UPSTREAM_CHECK),--check '$(UPSTREAM_CHECK)')
rebase: $(VENV)/.installed
	$(BIN)/python scripts/upstream.py rebase $(if $(REF),--ref $(REF)) $(UPSTREAM_ARGS)

rebase-continue: $(VENV)/.installed
	$(BIN)/python scripts/upstream.py continue $(UPSTREAM_ARGS)

rebase-skip: $(VENV)/.installed
	$(BIN)/python scripts/upstream.py skip $(UPSTREAM_ARGS)

upstream-check: $(VENV)/.installed
	$(BIN)/python scripts/upstream.py check $(UPSTREAM_ARGS)

bench: $(VENV)/.installed
	$(BIN)/python -m bench.parser_stream
	$(BIN)/python -m bench.parser_adversarial
	$(BIN)/python -m bench.tool_grammar
	$(BIN)/python -m bench.sse_throughput
	$(BIN)/python -m bench.metrics_overhead

clean:
	rm -rf $(VENV) $(UPSTREAM_VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache *.egg-info
