# The two commands README gives: `make run` (install and start memory-pool) and `make test`
# (the system tools the tests use, the test extra, then the whole suite: exactly what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test test-tools lint install install-test

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "memory-pool needs Python 3.11+")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

# Hermes Agent's real MemoryProvider and plugin loader, for tests/integrations (and, downloaded
# once into .cache/, st-qdrant-memory's own index.js, run there in node). Hermes is kept out of
# site-packages: the wheel installs top-level `cli`, `utils`, `tools`… that would shadow
# memory-pool's own modules; its pinned deps would clash with ours (hence --no-deps).
# tests/integrations/test_hermes_pip.py builds the memory-pool-hermes wheel with pip, which
# fetches its build backend (hatchling) from the package index into an isolated environment.
install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	test -f $(VENV)/hermes-agent/hermes_agent-0.19.0.dist-info/METADATA || \
		$(BIN)/python -m pip install --quiet --no-deps --upgrade \
		--target $(VENV)/hermes-agent hermes-agent==0.19.0
	$(BIN)/python -m tests.support.minilm
	$(BIN)/python -m tests.support.st_extension

run: install
	$(BIN)/memory-pool serve

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test-tools:
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/test-tools.sh

# The tools first, so one that cannot be installed stops the run at once (scripts/test-tools.sh);
# then lint and the suite, one after the other even under make -j.
test:
	@$(MAKE) --no-print-directory test-tools
	@$(MAKE) --no-print-directory lint
	$(BIN)/python -m pytest
