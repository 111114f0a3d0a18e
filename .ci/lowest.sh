#!/usr/bin/env bash
# The lowest-versions job: install the LOWEST version pyproject.toml allows of every direct dependency
# (uv's --resolution lowest-direct; transitive ones resolve as usual) into a fresh virtual environment,
# then run the fast tests (no Ray). A floor the code does not meet fails here.
#
# torch is the exception: it is pinned to 2.13.0, the CPU wheel on the dev machines (the torch>=2.3
# floor itself is not exercised: its wheels are gigabytes). Python: this job runs on python3 (3.11
# here, where the torch wheel is); the 3.10 floor is exercised by tests/deploy/test_images.py (the
# wheel with numpy alone) and by compiling every module with python3.10 below, when one is installed.
#
#   .ci/lowest.sh                     (LOWEST_VENV=/path to reuse an environment)
set -euo pipefail
cd "$(dirname "$0")/.."
# bytecode caches written (uv installs without them): with PYTHONDONTWRITEBYTECODE set, every import of
# torch, transformers and the project would compile from source again in each process (as the Makefile says)
unset PYTHONDONTWRITEBYTECODE
if [ -n "${LOWEST_VENV:-}" ]; then
  VENV=$LOWEST_VENV
else
  WORK=$(mktemp -d /tmp/steadyrank-lowest.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  VENV=$WORK/venv
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check uv
# the CPU torch wheel the dev machines hold (elsewhere PyPI's torch 2.13.0, which bundles CUDA libraries)
TORCH=$(ls /opt/wheels/torch-2.13.0+cpu-cp311-*.whl 2>/dev/null | head -1 || true)
"$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --resolution lowest-direct \
  "${TORCH:-torch==2.13.0}" -e '.[server,dev]'
"$VENV/bin/uv" pip list --python "$VENV/bin/python" 2>/dev/null \
  | grep -iE '^(numpy|torch|transformers|tokenizers|huggingface-hub|ray|faiss-cpu|bm25s|pydantic|fastapi|scipy|scikit-learn|pyyaml|prometheus-client|httpx) ' || true
for py in python3.10 /root/.pyenv/versions/3.10.13/bin/python3.10; do
  if "$py" --version >/dev/null 2>&1; then
    "$py" -m compileall -q -x '/\.venv/' metrics retrieval serve steadyrank tests benchmarks >/dev/null
    echo "lowest: every module compiles on $("$py" --version)"
    break
  fi
done
# (langsmith, a dependency of the langchain-cohere client tests, ships a pytest plugin that fails to
# import on the lowest pydantic these floors allow; no test here uses it)
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -p no:langsmith_plugin tests/metrics tests/cli tests/runtime tests/test_layout.py \
  tests/serve/test_settings.py tests/serve/test_serve_flags.py tests/deploy/test_manifests.py tests/hub/test_models_pull.py
