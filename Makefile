# `make test` is the one command CI runs (.ci/run): it builds the virtual environment it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test lint bench serve clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

lint: $(VENV)/.installed
	$(BIN)/ruff check tabby_fixed tests bench

test: lint
	$(BIN)/python -m pytest tabby_fixed tests

# With a config.yml here, serve what it says; without one, the scripted demo model on port 5000.
serve: $(VENV)/.installed
	$(BIN)/tabby-fixed serve $(if $(wildcard config.yml),,--model-dir examples/models --model-name demo)

bench: $(VENV)/.installed
	$(BIN)/python -m bench.parser_stream
	$(BIN)/python -m bench.sse_throughput

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
