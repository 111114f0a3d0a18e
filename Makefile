# The two commands the README promises:
#   make serve   set up a virtual environment and start the server on its embedded default
#   make test    set up the same environment (plus Prometheus), lint, build the docs strictly, run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check

.PHONY: setup serve test test-fast lint typecheck prometheus bench docs reference

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

test: setup prometheus lint typecheck docs
	$(PY) -m pytest -q tests

# The fast tier: no Ray, no server, no model download or index build: the HTTP layer in process
# (tests/http) and its resource budget (tests/budget), the metrics, the quality service, settings,
# telemetry, dialects and the layout (tests marked ray, cluster or lifecycle by tests/conftest.py are
# left out).
FAST_TESTS := tests/http tests/budget tests/metrics tests/quality tests/test_layout.py tests/deploy tests/serve/test_settings.py \
  tests/serve/test_telemetry.py tests/serve/test_dialect_translation.py tests/serve/test_admission.py \
  tests/serve/test_batcher.py tests/serve/test_priority.py

test-fast: setup
	$(PY) -m pytest -q -m "not ray" $(FAST_TESTS)

bench: setup
	$(PY) benchmarks/bench_metrics.py
