# Both targets create their own virtual environment; nothing else is assumed installed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean services wheel

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,langfuse,postgres,mcp,aiohttp]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tracejudge --store sqlite:///.tracejudge/demo.db demo

lint: $(STAMP)
	$(BIN)/ruff check tracejudge collectors tests benchmarks examples
	$(BIN)/ruff format --check tracejudge collectors

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite talks to a real PostgreSQL, Chromium and Prometheus: .ci/services.sh installs (as root)
# and starts them, and prints the PostgreSQL URL the store tests use.
unit: $(STAMP)
	url="$${TRACEJUDGE_TEST_POSTGRES:-}"; [ -n "$$url" ] || url="$$(bash .ci/services.sh)" || exit 1; \
	TRACEJUDGE_TEST_POSTGRES="$$url" $(BIN)/python -m pytest

test: lint typecheck unit

# The package as a user gets it: sdist + wheel built and checked, the wheel installed in a fresh venv
# outside the checkout, the demos and doctor run there from an empty folder (.ci/wheel.sh).
wheel: $(STAMP)
	PYTHON=$(BIN)/python bash .ci/wheel.sh

# Each benchmark prints ratios against an ideal (or a peer) measured in the same run.
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_intake.py
	$(BIN)/python benchmarks/bench_normalize.py
	$(BIN)/python benchmarks/bench_triage.py
	$(BIN)/python benchmarks/bench_sweep.py  # 10k and 100k traces, each phase twice: ~3.5 min of CPU
	$(BIN)/python benchmarks/bench_langfuse_pull.py
	$(BIN)/python benchmarks/bench_phoenix_pull.py
	$(BIN)/python benchmarks/bench_langfuse_client.py
	$(BIN)/python benchmarks/bench_score.py
	$(BIN)/python benchmarks/fuzz_intake.py --requests 5000
	$(BIN)/python benchmarks/bench_scale.py  # PostgreSQL: TRACEJUDGE_TEST_POSTGRES or --store

services:
	@bash .ci/services.sh

clean:
	rm -rf $(VENV) .tracejudge .pytest_cache .mypy_cache .ruff_cache
