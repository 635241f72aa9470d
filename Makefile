# skfedcp developer commands. Every target that runs Python uses the project's
# own virtual environment (.venv), created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One BLAS/OpenMP thread: the default pools make scikit-learn 20-50x slower on
# the 2-core machines this project is built on.
export OMP_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export MKL_NUM_THREADS := 1

.PHONY: help install demo test test-slow test-all test-flower lint typecheck format coverage \
	docs docs-noplot bench clean

help:
	@echo "make demo         run the main job (federated calibration on a real table)"
	@echo "make test         run the fast test suite"
	@echo "make install      create .venv and install skfedcp with the dev extras"
	@echo "make test-slow    run the statistical (Monte Carlo) tests"
	@echo "make test-all     run every test (fast and slow)"
	@echo "make test-flower  run the Flower adapter tests and a real deployment on 127.0.0.1"
	@echo "make lint         ruff check"
	@echo "make typecheck    mypy on the package (configuration in pyproject.toml)"
	@echo "make format       ruff format (rewrites files)"
	@echo "make coverage     run the fast tests with a line-coverage report"
	@echo "make docs         build the Sphinx documentation offline, gallery included"
	@echo "make docs-noplot  build the documentation without running the gallery"
	@echo "make bench        run the benchmark scripts at their small default sizes"
	@echo "make clean        remove .venv, build files and caches"
	@echo "make help         show this list"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# ISLP ships Bikeshare; --no-deps because its requirements pull in torch.
ISLP := ISLP==0.6.0

$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[datasets,plot]"
	$(BIN)/python -m pip install --quiet --no-deps $(ISLP)
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,datasets,plot]"
	$(BIN)/python -m pip install --quiet --no-deps $(ISLP)
	@touch $@ $(VENV)/.installed-demo

$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed-dev
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	@touch $@

install: $(VENV)/.installed-dev

demo: $(VENV)/.installed-demo
	$(BIN)/python -m skfedcp demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

test-slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m slow

test-all: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m "slow or not slow"

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check skfedcp tests examples benchmarks

# The package ships py.typed: its hints must hold (pyproject.toml [tool.mypy]).
typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

format: $(VENV)/.installed-dev
	$(BIN)/ruff format skfedcp tests examples benchmarks

coverage: $(VENV)/.installed-dev
	$(BIN)/python -m pip install --quiet pytest-cov
	$(BIN)/python -m pytest -q --cov=skfedcp --cov-report=term-missing

# -W: a warning fails the build (CI runs it); --keep-going lists them all.
docs: $(VENV)/.installed-docs
	$(BIN)/sphinx-build -q -W --keep-going -b html docs docs/_build/html

docs-noplot: $(VENV)/.installed-docs
	$(BIN)/sphinx-build -q -W --keep-going -b html -D plot_gallery=0 docs docs/_build/html

# A real Flower deployment on 127.0.0.1: a SuperLink, SuperNodes, flwr run.
$(VENV)/.installed-flower: pyproject.toml $(VENV)/.installed-dev
	$(BIN)/python -m pip install --quiet -e ".[flower]"
	@touch $@

# The adapter's unit tests and doctests (skipped without flwr) and the
# deployment test (-m flower) together.
test-flower: $(VENV)/.installed-flower
	$(BIN)/python -m pytest -q -m "flower or not slow" \
		tests/flower skfedcp/flower

$(VENV)/.installed-bench: pyproject.toml $(VENV)/.installed-dev
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	@touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info docs/_build .pytest_cache .ruff_cache
