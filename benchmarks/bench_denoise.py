"""How much of the retrieval loss from independently written conversational noise denoising recovers.

Run: ``python benchmarks/bench_denoise.py --beir BEIR_FOLDER [--index DIR] [--seeds 5] [--denoise rules] [--json]``
(the TREC-DL 2019 subset in BEIR layout was used for benchmarks/results/denoise_trec.json).

``steadyrank probe noise --noise dev|heldout`` (serve/tools/probes/phrasings.py: fragments written apart
from the probe templates, every list and the queries split in two halves before any tuning) for
both halves, BM25 and dense retrieval and ``--seeds`` draws of the noise; per half and mode the arms'
nDCG@10 means are pooled over the draws and the recovery is
(nDCG_denoised − nDCG_noisy) / (nDCG_clean − nDCG_noisy) at levels 2 and 4, with the range of the
per-draw recoveries. Clean queries must stay unchanged (the ``clean+rules`` arm equals ``clean``).
The dev half is what the rules were tuned on; the held-out half is the result.

Each run is a subprocess of the real CLI; this script only pools and tabulates. Prints one JSON
object (with provenance) and a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402

STEADYRANK = [sys.executable, "-m", "steadyrank.serve.cli"]
MEASURE = "ndcg@10"


def cli(*args: str) -> dict:
    """Run ``steadyrank ARGS --json``; its JSON answer."""
    done = subprocess.run([*STEADYRANK, *args, "--json"], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"steadyrank {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def recovered(clean: float, noisy: float, denoised: float) -> float | None:
    """(denoised − noisy) / (clean − noisy); None where the noise cost nothing."""
    lost = clean - noisy
    return (denoised - noisy) / lost if lost > 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="BEIR folder (corpus, queries, qrels)")
    parser.add_argument("--index", default=None, help="an index of --beir's corpus built with the bundled model")
    parser.add_argument("--seeds", type=int, default=5, help="noise draws pooled per half and mode")
    parser.add_argument("--denoise", default="rules", help="the denoiser measured (rules, or llm with its options after --)")
    parser.add_argument("--halves", default="dev,heldout")
    parser.add_argument("--modes", default="bm25,dense")
    parser.add_argument("--json", action="store_true", help="table to stderr, JSON only on stdout")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]

    results: dict[str, dict] = {}
    rows = []
    for half in args.halves.split(","):
        for mode in args.modes.split(","):
            runs = [cli("probe", "noise", "--queries", args.beir, "--beir", args.beir, "--noise", half, "--mode", mode,
                        "--seed", str(seed), "--denoise", args.denoise, *extra,
                        *(["--index", args.index] if args.index else []))
                    for seed in range(args.seeds)]
            arms = runs[0]["retrieval"].keys()
            pooled = {arm: sum(r["retrieval"][arm][MEASURE]["mean"] for r in runs) / len(runs) for arm in arms}
            entry: dict = {"queries": runs[0]["queries"], "seeds": args.seeds, MEASURE: pooled,
                           "clean_unchanged": all(r["retrieval"][f"clean+{args.denoise}"][MEASURE]["delta_vs_clean"] == 0
                                                  for r in runs),
                           "examples": runs[0]["examples"], "levels": {}}
            for level in ("2", "4"):
                per_draw = [recovered(r["retrieval"]["clean"][MEASURE]["mean"], r["retrieval"][f"noise{level}"][MEASURE]["mean"],
                                      r["retrieval"][f"noise{level}+{args.denoise}"][MEASURE]["mean"]) for r in runs]
                finite = [v for v in per_draw if v is not None]
                entry["levels"][level] = {
                    "lost": pooled["clean"] - pooled[f"noise{level}"],
                    "recovered": recovered(pooled["clean"], pooled[f"noise{level}"], pooled[f"noise{level}+{args.denoise}"]),
                    "per_draw": per_draw, "per_draw_min": min(finite, default=None), "per_draw_max": max(finite, default=None)}
                lv = entry["levels"][level]
                rows.append([half, mode, f"level {level}", pooled["clean"], pooled[f"noise{level}"],
                             pooled[f"noise{level}+{args.denoise}"],
                             None if lv["recovered"] is None else 100 * lv["recovered"], entry["clean_unchanged"]])
            results[f"{half}/{mode}"] = entry
    payload = {"benchmark": "denoise", "model": "bundled all-MiniLM-L6-v2", "measure": MEASURE, "denoise": args.denoise,
               "results": results}
    emit(payload, ["half", "mode", "level", "clean", "noisy", f"noisy+{args.denoise}", "recovered %", "clean unchanged"],
         rows, json_only=args.json)


if __name__ == "__main__":
    main()
