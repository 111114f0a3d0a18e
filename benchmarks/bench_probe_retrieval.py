"""From Δ-margins to retrieval: ``steadyrank probe names --retrieval`` on bundles about a BEIR set's queries.

Run: ``python benchmarks/bench_probe_retrieval.py --beir BEIR_FOLDER [--queries 40] [--modes dense,bm25]
[--ablations base,mask,...] [--json]`` (the TREC-DL 2019 subset in BEIR layout was used for
benchmarks/results/probe_retrieval_trec.json).

The topics of the English bundles are the BEIR folder's query texts (written to a temporary topics
file, one a line), so each bundle asks for an author's work on a real information need. Per mode,
the real CLI indexes each ablation's bundles (every candidate a passage) and searches each bundle's
query: Recall@1/@10 of the right passage beside the mean Δname. Quality numbers only: nothing here
is timed. Prints one JSON object (with provenance) and a table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402
from bench_probes import cli  # noqa: E402

from steadyrank.retrieval.corpus import read_queries  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="BEIR folder whose queries become the bundles' topics")
    parser.add_argument("--queries", type=int, default=40, help="English probe bundles (default %(default)s)")
    parser.add_argument("--modes", default="dense,bm25", help="first stages (default %(default)s)")
    parser.add_argument("--ablations", default="mask,gibberish,near_miss,initials,case_punct",
                        help="ablations besides base (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="table to stderr, JSON only on stdout")
    args = parser.parse_args()

    topics = sorted(set(read_queries(args.beir).values()))
    runs = {}
    with tempfile.TemporaryDirectory(prefix="bench-probe-retrieval-") as tmp:
        path = Path(tmp) / "topics.txt"
        path.write_text("\n".join(topics) + "\n", encoding="utf-8")
        for mode in args.modes.split(","):
            runs[mode] = cli("probe", "names", "--topics", str(path), "--lang", "en", "--queries", str(args.queries),
                             "--ablations", args.ablations, "--seed", str(args.seed), "--precision", "fp32",
                             "--retrieval", "--mode", mode, "--recall-k", "1,10")
    rows = []
    for mode, run in runs.items():
        for r in run["retrieval"]["summary"]:
            split = r["by_margin"]
            rows.append([mode, r["ablation"], r["n"], r["delta_name"]["mean"], r["recall@1"]["mean"],
                         r["recall@10"]["mean"], split["positive"]["mean"], split["positive"]["n"],
                         split["not_positive"]["mean"], split["not_positive"]["n"]])
    payload = {"beir": Path(args.beir).name, "topics": len(topics), "bundles": args.queries, "lang": "en",
               "precision": "fp32", "model": "bundled all-MiniLM-L6-v2", "runs": runs}
    emit(payload, ["mode", "ablation", "n", "Δname", "R@1", "R@10", "R@1|Δ>0", "n>0", "R@1|Δ≤0", "n≤0"], rows,
         json_only=args.json)


if __name__ == "__main__":
    main()
