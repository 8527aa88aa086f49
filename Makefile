# streamtasks — developer entry points. Both targets create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench bench-state soak clean

$(STAMP): pyproject.toml examples/custom_assignor/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The distribution is streamtasks-kafka; a .venv made before the rename also holds it as "streamtasks".
	$(BIN)/python -m pip uninstall --quiet --yes streamtasks 2>/dev/null || true
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
# else Tansu, with the reason printed) and, alongside it, the live smoke subset on Tansu (its
# own broker; its output is printed after the suite's; SMOKE_ALONGSIDE=0 runs it after).
SMOKE_ALONGSIDE ?= 1
SMOKE_LOG       := .tansu-smoke.log
unit: $(STAMP)
	@if [ "$(SMOKE_ALONGSIDE)" = 1 ]; then \
		echo "STREAMTASKS_BROKER=tansu $(BIN)/pytest -m smoke -p no:cacheprovider >$(SMOKE_LOG) 2>&1 &"; \
		STREAMTASKS_BROKER=tansu $(BIN)/pytest -m smoke -p no:cacheprovider >$(SMOKE_LOG) 2>&1 & smoke=$$!; \
		echo "$(BIN)/pytest"; $(BIN)/pytest; suite=$$?; \
		wait $$smoke; tansu=$$?; \
		echo "== the live smoke subset on Tansu, run alongside (exit status $$tansu) =="; \
		cat $(SMOKE_LOG); \
		[ $$suite -eq 0 ] && [ $$tansu -eq 0 ]; \
	else \
		echo "$(BIN)/pytest"; $(BIN)/pytest && \
		echo "STREAMTASKS_BROKER=tansu $(BIN)/pytest -m smoke" && STREAMTASKS_BROKER=tansu $(BIN)/pytest -m smoke; \
	fi

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python benchmarks/assignors.py
	$(BIN)/python benchmarks/codecs.py
	$(MAKE) bench-state

bench-state: $(STAMP)
	$(BIN)/python benchmarks/state.py

# Every simulator protocol on fresh random seeds for MINUTES (docs/simulation.md, "Soak runs");
# e.g. make soak MINUTES=60 SOAK_ARGS='--jobs 2 --faults loss,dup'. Exit status 1 on a violation.
MINUTES   ?= 10
SOAK_ARGS ?=
soak: $(STAMP)
	$(BIN)/python -m streamtasks.sim --soak $(MINUTES) $(SOAK_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache $(SMOKE_LOG)
