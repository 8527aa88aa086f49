# streamtasks — developer entry points. Both targets create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench bench-state clean

$(STAMP): pyproject.toml examples/custom_assignor/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(STAMP)
	$(BIN)/streamtasks demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check --exclude '*.md' .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The whole suite on the default broker (Apache Kafka where Java 17+ and Maven are on PATH,
# else Tansu, with the reason printed), then the live smoke subset on Tansu.
unit: $(STAMP)
	$(BIN)/pytest
	STREAMTASKS_BROKER=tansu $(BIN)/pytest -m smoke

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python benchmarks/assignors.py
	$(BIN)/python benchmarks/codecs.py
	$(MAKE) bench-state

bench-state: $(STAMP)
	$(BIN)/python benchmarks/state.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
