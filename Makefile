# gh-run: the two commands that do everything on a fresh Debian machine are
#   make demo   (install gh-run alone, run the smoke job on the embedded default: the local executor)
#   make test   (install everything, bring up the real local SLURM test cluster, run the whole suite)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The reference workload's torch: a CPU build is enough here (CI has no GPU).
TORCH ?= torch==2.13.0

# What each entry point installs into $(VENV) (pyproject.toml's extras), so each downloads only
# what it uses:
#   install-runtime  gh-run and its runtime dependencies (no torch, no test tools): make demo
#   workload         + torch, for jobs that run the reference workload (workloads/)
#   install          + torch and the dev tools (pytest, ruff, mypy, HTA, ...): make test, lint
RUNTIME := $(VENV)/.installed-runtime
WORKLOAD := $(VENV)/.installed-workload
DEV := $(VENV)/.installed

.PHONY: install install-runtime workload deps demo test test-unit test-pythons test-arm64 cluster-up \
	cluster-down cluster-status lint check schema bench mutate dist clean golden

# Debian's python3 makes venvs only with python3-venv (ensurepip); a fresh machine lacks it.
$(BIN)/python:
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { \
	  echo "$(PYTHON) cannot make a venv (no ensurepip): installing python3-venv"; \
	  apt-get update -q && apt-get install -y -q python3-venv; }
	$(PYTHON) -m venv $(VENV)

install-runtime: $(RUNTIME)

$(RUNTIME): pyproject.toml setup.py orchestrator/analysis/readers/_kineto_scan.c orchestrator/analysis/readers/_sqlite_pages.c | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

workload: $(WORKLOAD)

$(WORKLOAD): pyproject.toml setup.py orchestrator/analysis/readers/_kineto_scan.c orchestrator/analysis/readers/_sqlite_pages.c | $(BIN)/python
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[workload]'
	touch $@ $(RUNTIME)

install: $(DEV)

$(DEV): pyproject.toml setup.py orchestrator/analysis/readers/_kineto_scan.c orchestrator/analysis/readers/_sqlite_pages.c | $(BIN)/python
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[dev,workload]'
	touch $@ $(WORKLOAD) $(RUNTIME)

# System packages, then the real nsys (2023.4.4, 2022.4.2, 2024.2.3), Apptainer 1.4.5 and the test
# image under $GH_RUN_TOOLS (default /opt/gh-run); each step returns at once when already done. The
# image build fetches the nvtx wheel with the venv's pip, hence `install` first.
deps: install
	bash scripts/system-deps.sh
	bash scripts/install-tools.sh

demo: install-runtime
	$(BIN)/gh-run submit jobs/smoke.yaml --executor local --wait
	$(BIN)/gh-run status --limit 5
	@echo "--- what the analysis says of two real H100 traces shipped with gh-run (offload vs not):"
	$(BIN)/gh-run compare example:baseline example:offload

cluster-up:
	bash scripts/devcluster.sh up

cluster-down:
	bash scripts/devcluster.sh down

cluster-status:
	bash scripts/devcluster.sh status

# pytest-xdist workers: TEST_WORKERS for the integration tests, which mostly wait for SLURM
# (their jobs, its polls), so they outnumber the cores; UNIT_WORKERS for the unit tests, twice
# the cores: they compute, but 45 % of their time they wait too (the processes they start, a
# local job, the dev cluster's turn), so on 2 cores 4 workers took 347 s where 2 took 503, for
# the same CPU (DEVELOPERS.md). Tests share the dev cluster test by test (tests/conftest.py,
# cluster_hold; docs/devcluster.md). worksteal: an idle worker takes tests from a busy one, so a
# long test does not leave one core alone at the end.
TEST_WORKERS ?= 4
UNIT_WORKERS ?= 4
XDIST = --dist worksteal

# Bytecode is written and reused (__pycache__, ignored by git) even where the environment sets
# PYTHONDONTWRITEBYTECODE: else every `python -m orchestrator` a test starts compiles gh-run's
# modules again, and every xdist worker rewrites the test modules again (scripts/test-suite.sh).
export PYTHONDONTWRITEBYTECODE =

# Every test under every interpreter, GH_RUN_NO_SKIPS=1 (a skipped test counts as a failure):
# the integration tests, and beside them, at a lower priority so that they fill the cores while
# the integration tests wait, the unit tests under the venv's Python and then under each extra
# interpreter (3.13, 3.14; warnings as errors: test-pythons). Logs in .test-logs/.
test: install deps cluster-up
	TEST_WORKERS=$(TEST_WORKERS) UNIT_WORKERS=$(UNIT_WORKERS) bash scripts/test-suite.sh

test-unit: install
	$(BIN)/pytest -q -p no:cacheprovider -n $(UNIT_WORKERS) $(XDIST) tests/unit

# The edit loop: lint, then the unit tests on both cores but the `slow` ones (tests/slow_tests.txt:
# the test functions that cost the most CPU); no cluster to bring up, no extra Pythons. `make
# test` runs everything.
check: lint
	$(BIN)/pytest -q -p no:cacheprovider -n $(UNIT_WORKERS) $(XDIST) -m "not slow" tests/unit

# The unit tests under each extra interpreter `make deps` installs ($GH_RUN_TOOLS/python/X.Y:
# 3.13, 3.14), each in its own venv (.venvs/X.Y), with every warning an error.
test-pythons: install deps cluster-up
	PYTEST_WORKERS=$(UNIT_WORKERS) bash scripts/test-pythons.sh

# gh-run on aarch64 (GH200's Grace) under qemu-user emulation, one process at a time, nothing
# registered with the kernel: an arm64 Debian root, PyPI's arm64 wheels, the C readers compiled
# there; the wheel with and without a compiler, the readers' tests, the golden analyses and the
# in-job analysis script, byte for byte as on x86-64 (scripts/test-arm64.sh). CI runs it after
# `make test` and `make lint` (.ci/run); not part of `make test`, the developer's answer: 15
# minutes from nothing on the 2-core development machine at a load of ~5 (DEVELOPERS.md).
test-arm64: install
	bash scripts/test-arm64.sh

# Regenerate the golden outputs (rendered job scripts, analyze / compare / report of every
# committed trace) and docs/metrics.md's catalogue table after an intended change; review
# `git diff tests/golden docs` before committing.
golden: install
	GH_RUN_UPDATE_GOLDEN=1 $(BIN)/pytest -q tests/unit/test_golden.py \
	  tests/unit/test_golden_outputs.py tests/unit/test_catalogue.py

# lint-imports: the rooms' layering (pyproject.toml's [tool.importlinter] contracts).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy orchestrator workloads

# Mutation testing of the pure core (units, quoting, escaping, interval unions, thresholds,
# artifact integrity): [tool.mutmut] in pyproject.toml. Slow (tens of minutes on 2 cores) and not
# part of CI; `.venv/bin/mutmut results` lists the survivors, `mutmut show NAME` one of them.
mutate: install
	$(BIN)/pip install -q -e '.[mutate]'
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2 || true
	$(BIN)/mutmut results

# Regenerate docs/schema/*.json from the models (tests fail when they are stale).
schema: install
	$(BIN)/gh-run schema all --write

# The wheel and the sdist an admin installs from (README, "Installing gh-run on a login node"),
# into dist/: templates, schemas and examples inside the package; the C parts compiled where a
# C compiler is (the wheel then fits this Python and machine), left out where none is. Built
# with the build backend alone (pyproject.toml's [build-system], in .venvs/build; no torch, no
# dev tools): the sdist, then the wheel from the unpacked sdist (scripts/build_dist.py).
dist:
	rm -rf build dist
	$(PYTHON) scripts/build_dist.py --venv .venvs/build --out dist
	@ls -l dist

# The checkout's .gh-run/config.yaml (which names clusters/) is kept; its runs are not.
clean:
	rm -rf $(VENV) .venvs build dist *.egg-info
	find .gh-run -mindepth 1 -maxdepth 1 ! -name config.yaml -exec rm -rf {} + 2>/dev/null || true
