"""Δ-margin and noise probes of the bundled all-MiniLM-L6-v2, and what ``rules`` denoising recovers.

Run: ``python benchmarks/bench_probes.py --beir BEIR_FOLDER [--index DIR] [--queries 100] [--runs 3]
[--reuse-names EARLIER.json] [--json]``
(the TREC-DL 2019 subset in BEIR layout was used for benchmarks/results/probes_minilm.json).

1. ``steadyrank probe names`` (EN and FR, every ablation): mean Δname and ΔΔ% per ablation; the
   identity-destroying ablations (mask, gibberish, near miss) against the light formatting ones, next
   to the paper's headline (identity-destroying −64 % to −100 %, light |ΔΔ%| ≲ 12 %).
2. ``steadyrank probe noise --beir`` (EN templates): cosine of noisy queries to the clean ones per
   level, and dense-retrieval nDCG@10 / RA-nWG@10 / Recall@100 of clean, noisy and ``rules``-denoised
   queries. Targets: ``rules`` recovers ≥ half of the nDCG@10 lost at level 4; clean-query nDCG@10
   moves by ≤ 0.002 under ``rules``.

Both commands run as subprocesses (the real CLI); this script only tabulates. Prints one JSON
object (with commit, argv, date, load average) and a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402

from steadyrank.serve.tools.probes.ablations import IDENTITY_DESTROYING  # noqa: E402

STEADYRANK = [sys.executable, "-m", "steadyrank.serve.cli"]
#: The paper's headline (§4.2, OpenAI/Voyage embedders): ranges of ΔΔ%.
PAPER = {"identity_destroying_pct": [-100.0, -64.0], "light_abs_pct_at_most": 12.0}


def cli(*args: str) -> dict:
    """Run ``steadyrank ARGS --json``; its JSON answer."""
    done = subprocess.run([*STEADYRANK, *args, "--json"], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"steadyrank {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="BEIR folder for the noise retrieval effect")
    parser.add_argument("--queries", type=int, default=100, help="probe bundles per language and run")
    parser.add_argument("--runs", type=int, default=3, help="probe generations pooled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grade-map", default="3:5,2:4,1:3,0:1", help="qrels grades → RA-nWG rubric")
    parser.add_argument("--index", default=None,
                        help="an index of --beir's corpus built with the bundled model (default: built in a temporary folder)")
    parser.add_argument("--reuse-names", metavar="FILE", default=None,
                        help="take the names part from an earlier result of this script (its provenance is kept as "
                             "names_from) instead of running it again: for re-measuring the noise part alone")
    parser.add_argument("--json", action="store_true", help="table to stderr, JSON only on stdout")
    args = parser.parse_args()

    names_from = None
    if args.reuse_names:
        earlier = json.loads(Path(args.reuse_names).read_text(encoding="utf-8"))
        names, names_from = earlier["names"], {"file": Path(args.reuse_names).name, "provenance": earlier["provenance"]}
    else:
        names = cli("probe", "names", "--queries", str(args.queries), "--runs", str(args.runs), "--seed", str(args.seed))
    noise = cli("probe", "noise", "--queries", args.beir, "--beir", args.beir, "--grade-map", args.grade_map,
                "--seed", str(args.seed), *(["--index", args.index] if args.index else []))

    rows = []
    by_lang: dict[str, dict[str, list[float]]] = {}
    for r in names["summary"]:
        dd = r.get("delta_delta_pct", {}).get("mean", float("nan"))
        group = "base" if r["ablation"] == "base" else ("identity" if r["ablation"] in IDENTITY_DESTROYING else "light")
        if group != "base":
            by_lang.setdefault(r["lang"], {}).setdefault(group, []).append(dd)
        rows.append([f"names {r['lang']}", r["ablation"], group, r["delta_name"]["mean"], dd, r["ties"]["name"]])
    groups = {lang: {"identity_destroying_mean_pct": sum(g["identity"]) / len(g["identity"]),
                     "identity_destroying_least_pct": max(g["identity"]),
                     "light_max_abs_pct": max(abs(v) for v in g["light"]),
                     "light_outside_paper": [r["ablation"] for r in names["summary"] if r["lang"] == lang
                                             and r["ablation"] not in IDENTITY_DESTROYING + ("base",)
                                             and abs(r["delta_delta_pct"]["mean"]) > PAPER["light_abs_pct_at_most"]]}
              for lang, g in by_lang.items()}

    for level, r in noise["cosine"].items():
        for arm, label in (("noisy", "noisy→clean"), ("denoised", "rules→clean")):
            rows.append(["noise cosine", f"level {level}", label, r[arm]["cosine"]["mean"], r[arm]["drop_pct"], None])
    ret = noise["retrieval"]
    for arm, r in ret.items():
        rows.append(["retrieval", arm, "nDCG@10 / RA-nWG@10", r["ndcg@10"]["mean"], r["ra_nwg@10"]["mean"], None])
    clean, noisy4, denoised4 = (ret[k]["ndcg@10"]["mean"] for k in ("clean", "noise4", "noise4+rules"))
    lost = clean - noisy4
    targets = {
        "ndcg10_lost_at_level4": lost,
        "ndcg10_recovered_by_rules_at_level4": denoised4 - noisy4,
        "recovered_fraction": (denoised4 - noisy4) / lost if lost > 0 else None,
        "recovers_at_least_half": bool(lost > 0 and (denoised4 - noisy4) >= lost / 2),
        "clean_ndcg10_change_under_rules": ret["clean+rules"]["ndcg@10"]["delta_vs_clean"],
        "clean_within_0.002": abs(ret["clean+rules"]["ndcg@10"]["delta_vs_clean"]) <= 0.002,
    }
    payload = {"benchmark": "probes", "model": "bundled all-MiniLM-L6-v2", "paper": PAPER,
               "names": names, "names_from": names_from, "names_groups": groups, "noise": noise, "targets": targets}
    emit(payload, ["probe", "row", "group / arm", "value", "ΔΔ% / drop % / RA-nWG", "ties"], rows, json_only=args.json)


if __name__ == "__main__":
    main()
