# One task runner for people and CI. Every target uses the virtual environment at .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test check lint unit fast bench docs clean

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

## run: install the runtime and start the product (the demo when no target is configured); PORT=8502 picks the dashboard's port
run: $(VENV)/.runtime
	$(PY) -m app run $(if $(PORT),--port $(PORT))

## test: install everything and run lint, type checks and the whole test suite
test: $(VENV)/.dev lint unit

## check: the fast tier: lint, type checks and the tests that need no server, browser or engine
check: $(VENV)/.dev lint fast

# The tests marked `fast` by tests/conftest.py (the other test modules are not even collected).
fast: $(VENV)/.dev
	$(PY) -m pytest -m fast -q -n 2

lint: $(VENV)/.dev
	$(PY) -m ruff check .
	$(PY) -m mypy

# Whole files spread over three workers (pytest-xdist), the longest first (tests/conftest.py): many
# tests wait on servers, sleeps and browsers rather than a core, so three fill this 2-core machine.
# The 20 slowest tests are printed at the end of every run (CI's log included): where time goes.
unit: $(VENV)/.dev
	$(PY) -m pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=20

## docs: regenerate docs/reference.md (the catalogue, the figures table, the query views) and the limits and channel tables of docs/configuration.md
docs: $(VENV)/.runtime
	$(PY) -m app.reference_doc

## bench: run every benchmark under bench/ and print its figures
bench: $(VENV)/.dev
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
