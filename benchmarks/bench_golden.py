"""Golden-set refinement benchmark: Kendall τ to the truth vs judge calls, on a simulated judge.

Run: ``python benchmarks/bench_golden.py [--seeds 8] [--items 30] [--json]``.

Each seed draws one query of ``--items`` candidates with true utilities u ~ U(1, 5). The simulated
judge (``steadyrank.serve.tools.golden.simulate``) grades each candidate once, pointwise, as
``clip(round(u + N(0, 0.7)), 1, 5)`` and ranks listwise batches of 5 as Plackett–Luce draws with
log-worth u (temperature 1). Compared at the same number of judge calls, averaged over seeds:

- ``single shot``: the grades alone (``items`` calls; ties broken at random count as ties, τ-b);
- ``repeated grades``: every candidate graded r times, grades averaged (r·items calls) — the
  equal-budget pointwise peer;
- ``refined``: single-shot grades then the build's refinement (``RefineSettings`` defaults with
  ``window = items``, ``top_k = 20``), τ after every listwise call.

Prints one JSON object and a table (τ per number of judge calls). Not a timing benchmark.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit, write_json  # noqa: E402

from steadyrank.serve.tools.golden.refine import RefineSettings  # noqa: E402
from steadyrank.serve.tools.golden.simulate import simulate_query  # noqa: E402


def curve_at(curve: list[tuple[int, float]], calls: int) -> float:
    """τ after ``calls`` judge calls (the last value once refinement stopped)."""
    return [tau for c, tau in curve if c <= calls][-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--max-calls", type=int, default=60, help="listwise calls per query at most")
    parser.add_argument("--temperature", type=float, default=1.0, help="PL noise of the listwise judge")
    parser.add_argument("--grade-noise", type=float, default=0.7, help="σ of the pointwise grade noise")
    parser.add_argument("--out", default=None, help="also write the JSON (with its provenance) here")
    parser.add_argument("--json", action="store_true", help="table to stderr, JSON only on stdout")
    args = parser.parse_args()
    settings = RefineSettings(window=args.items, top_k=20, max_calls=args.max_calls)
    runs = [simulate_query(args.items, settings, seed=seed, temperature=args.temperature, grade_noise=args.grade_noise)
            for seed in range(args.seeds)]
    n = args.items
    checkpoints = sorted({n + c for c in range(0, args.max_calls + 1, 10)}
                         | {n * r for r in range(1, 4) if n * r <= n + args.max_calls})
    rows, points = [], []
    for calls in checkpoints:
        refined = float(np.mean([curve_at(r["curve"], calls) for r in runs]))
        repeated_values = [dict(r["repeated_curve"]).get(calls) for r in runs]
        repeated = float(np.mean(repeated_values)) if all(v is not None for v in repeated_values) else None
        points.append({"judge_calls": calls, "refined_tau": refined, "repeated_grades_tau": repeated})
        rows.append([calls, refined, repeated])
    single = float(np.mean([r["single_shot"] for r in runs]))
    final = float(np.mean([r["refined"] for r in runs]))
    payload = {
        "benchmark": "golden_refinement", "seeds": args.seeds, "items": n, "settings": settings.model_dump(),
        "temperature": args.temperature, "grade_noise": args.grade_noise, "load_average": os.getloadavg(),
        "single_shot_tau": single, "refined_tau_final": final,
        "refined_minus_single_shot": {"mean": final - single,
                                      "per_seed": [r["refined"] - r["single_shot"] for r in runs]},
        "judge_calls_mean": float(np.mean([r["judge_calls"] for r in runs])),
        "locks_mean": float(np.mean([r["locks"] for r in runs])),
        "stabilised": sum(r["stability_round"] is not None for r in runs),
        "curve": points,
    }
    rows.append(["single shot", single, None])
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["judge calls", "refined tau", "repeated-grades tau"], rows, json_only=args.json)


if __name__ == "__main__":
    main()
