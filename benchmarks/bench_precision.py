"""Precision quality benchmark: ``steadyrank precision-report`` on a BEIR folder, with provenance.

Run::

    .venv/bin/python benchmarks/bench_precision.py --data BEIR_DIR [--model DIR] [--depth 50] \\
        [--regimes fp32,bf16,bf16+hps,int8,int8+hps] --out benchmarks/results/precision_cpu.json

Every argument after the script's own goes to ``precision-report`` unchanged (``--json`` is added);
the report (per regime: nDCG@10 with its tie range [min, max], E[M], ties at k) is written with the
commit, argv, UTC date, the load average before and after, and the seconds the report took.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._report import run_facts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args, report_args = parser.parse_known_args()
    from steadyrank.serve.cli import main as cli

    facts = run_facts()
    started = time.perf_counter()
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = cli(["precision-report", *report_args, "--json"])
    if code != 0:
        raise SystemExit(code)
    payload = {"benchmark": "bench_precision", **facts, "seconds": round(time.perf_counter() - started, 1),
               "load_average_after": list(os.getloadavg()), "report": json.loads(captured.getvalue())}
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    for name, entry in payload["report"]["regimes"].items():
        print(name, json.dumps(entry["metrics"].get("ndcg@10", entry["metrics"])))


if __name__ == "__main__":
    main()
