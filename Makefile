# The two commands the README promises:
#   make serve   set up a virtual environment and start the server on its embedded default
#   make test    set up the same environment (plus Prometheus), lint, build the docs strictly, run the whole test suite
VENV ?= .venv
# Python writes its bytecode caches (__pycache__, ignored by git) whatever the caller's environment says:
# with PYTHONDONTWRITEBYTECODE set, every process (each pytest worker, each server and Ray worker a test
# starts) compiles the project's modules anew and pytest re-rewrites every test module's asserts, which
# made collecting the fast tiers take 69 s instead of 25 s on a 2-core box.
unexport PYTHONDONTWRITEBYTECODE
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check

.PHONY: setup serve test test-fast test-unit lint typecheck prometheus bench docs reference

setup: $(VENV)/.installed

# torch is installed first and pinned, so that no other requirement can make pip resolve
# a different (multi-gigabyte CUDA) torch build.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install torch==2.13.0
	$(PIP) install -e '.[server,dev]'
	touch $@

serve: setup
	$(VENV)/bin/steadyrank serve

# The Prometheus integration test needs the real server and promtool (Debian package `prometheus`).
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus)

# ruff (configured in pyproject.toml) runs before the tests: a lint finding fails `make test`.
lint: setup
	$(PY) -m ruff check .

# The docs site (mkdocs, material theme): the generated reference pages must be current, and the
# build is strict (a broken link, anchor or nav entry fails it). Output in site/ (ignored).
docs: setup
	$(PY) -m steadyrank.serve.cli.reference --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Regenerate docs/reference/*.md (settings, metrics, CLI) from their sources.
reference: setup
	$(PY) -m steadyrank.serve.cli.reference --write


# basedpyright (configured in pyproject.toml: strict for metrics/ and retrieval/, standard over the rest) runs
# before the tests too, over build/typecheck/steadyrank: links to the top-level folders under their import names
# (the editable install's import hook is invisible to a type checker, and pyright does not walk linked folders,
# hence the explicit file list). Any error fails (no baseline of older errors is kept).
typecheck: setup
	@mkdir -p build/typecheck/steadyrank
	@for part in metrics retrieval serve; do ln -sfn ../../../$$part build/typecheck/steadyrank/$$part; done
	@for file in __init__.py lazy.py; do ln -sf ../../../steadyrank/$$file build/typecheck/steadyrank/$$file; done
	$(VENV)/bin/basedpyright $$(find -L build/typecheck/steadyrank -name '*.py' -not -path '*/__pycache__/*' -not -path '*/data/*')

# The fast tiers on every core, then the e2e tier in one process (see the test tiers below).
test: setup prometheus lint typecheck docs
	$(PY) -m pytest -q -n auto --dist loadfile -m "not e2e" tests
	$(PY) -m pytest -q -m e2e tests

# The test tiers (tests/tiers.py): unit (in process, no Ray, no other process), integration (in
# process, through the HTTP app or model weights) and e2e (Ray or processes). A
# test's marks and fixtures decide its tier, and a unit or integration test that starts a process
# or Ray fails. test-fast runs the first two, test-unit the first, each on every core (pytest-xdist,
# a test file per worker); `make test` runs them so too, then the e2e tier in one process (one Ray
# instance per session).
test-fast: setup
	$(PY) -m pytest -q -n auto --dist loadfile -m "not e2e" tests

test-unit: setup
	$(PY) -m pytest -q -n auto --dist loadfile -m unit tests

bench: setup
	$(PY) benchmarks/bench_metrics.py
