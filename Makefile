# The two commands the README promises:
#   make serve   set up a virtual environment and start the server on its embedded default
#   make test    set up the same environment (plus Prometheus) and run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check

.PHONY: setup serve test test-fast lint prometheus bench

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

test: setup prometheus lint
	$(PY) -m pytest -q tests

# The fast tier: no Ray, no server, no model download or index build: the HTTP layer in process
# (tests/http), the metrics, the quality service, settings, telemetry, dialects and the layout
# (tests marked ray, cluster or lifecycle by tests/conftest.py are left out).
FAST_TESTS := tests/http tests/metrics tests/quality tests/test_layout.py tests/deploy tests/serve/test_settings.py \
  tests/serve/test_telemetry.py tests/serve/test_dialect_translation.py tests/serve/test_admission.py \
  tests/serve/test_batcher.py tests/serve/test_priority.py

test-fast: setup
	$(PY) -m pytest -q -m "not ray" $(FAST_TESTS)

bench: setup
	$(PY) benchmarks/bench_metrics.py
