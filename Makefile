# gh-run: the two commands that do everything on a fresh Debian machine are
#   make demo   (install, run the smoke job on the embedded default: the local executor)
#   make test   (install, bring up the real local SLURM test cluster, run the whole suite)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The reference workload's torch: a CPU build is enough here (CI has no GPU).
TORCH ?= torch==2.13.0

.PHONY: install deps demo test test-unit cluster-up cluster-down cluster-status lint schema bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[dev,workload]'
	touch $@

deps:
	bash scripts/system-deps.sh

demo: install
	$(BIN)/gh-run submit jobs/smoke.yaml --executor local --wait
	$(BIN)/gh-run status --limit 5
	@echo "--- what the analysis says of two real H100 traces shipped in tests/data (offload vs not):"
	$(BIN)/gh-run compare tests/data/traces/baseline tests/data/traces/offload

cluster-up:
	bash scripts/devcluster.sh up

cluster-down:
	bash scripts/devcluster.sh down

cluster-status:
	bash scripts/devcluster.sh status

# GH_RUN_NO_SKIPS=1: everything the suite needs is here, so a skipped test counts as a failure.
test: install deps cluster-up
	GH_RUN_NO_SKIPS=1 $(BIN)/pytest -q

test-unit: install
	$(BIN)/pytest -q tests/unit

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy orchestrator workloads

# Regenerate docs/schema/*.json from the models (tests fail when they are stale).
schema: install
	$(BIN)/gh-run schema all --write

clean:
	rm -rf $(VENV) .gh-run build *.egg-info
