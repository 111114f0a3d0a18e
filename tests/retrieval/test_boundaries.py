"""``retrieval`` stays below ``serve`` in the layering: no torch, ray or serve on import."""

from __future__ import annotations

import subprocess
import sys

from tests.retrieval.helpers import REPO


def test_retrieval_imports_no_model_runtime():
    code = (
        "import sys, steadyrank.retrieval, steadyrank.retrieval.calibration, steadyrank.retrieval.pipeline\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('torch', 'ray', 'transformers') or m.startswith('steadyrank.serve'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
