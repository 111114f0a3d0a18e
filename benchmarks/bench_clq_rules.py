"""The CLQ choice rules on a finished sweep: quality-target picks, efficiency, marginal ΔQ/Δms.

Run: ``python benchmarks/bench_clq_rules.py --grid benchmarks/clq_grid_trec.yaml
--results benchmarks/results/clq_trec.json [--json]`` (what made benchmarks/results/clq_rules_trec.json).

``steadyrank clq decide`` re-applies the grid's prices, bounds and quality targets to the sweep's
stored per-configuration measurements (quality per query, latencies, costs): nothing is re-measured,
so the latencies are those of the sweep's own run (its provenance is kept as ``sweep_provenance``).
Prints one JSON object (with provenance; the per-configuration results are left out, they are in
the sweep's file) and the marginal table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402
from bench_probes import cli  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", required=True, help="the grid: prices, bounds, quality targets")
    parser.add_argument("--results", required=True, help="a sweep's results.json")
    parser.add_argument("--json", action="store_true", help="table to stderr, JSON only on stdout")
    args = parser.parse_args()

    decided = cli("clq", "decide", "--grid", args.grid, "--results", args.results)
    sweep = json.loads(Path(args.results).read_text(encoding="utf-8"))
    payload = {key: value for key, value in decided.items() if key != "results"}
    payload["sweep_provenance"] = sweep.get("provenance")
    rows = [[s["config_id"], s["latency"], s["quality"], s["delta_quality"], s["delta_ms"], s["delta_quality_per_ms"],
             s.get("within_noise")] for s in decided["marginal"]]
    emit(payload, ["frontier step", "latency ms", "quality", "ΔQ", "Δms", "ΔQ/Δms", "ΔQ within noise"], rows,
         json_only=args.json)


if __name__ == "__main__":
    main()
