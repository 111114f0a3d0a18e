"""The optional set metrics, RA-nWG's sensitivity and swap rates on a BEIR folder, through ``steadyrank evaluate``.

Run: ``python benchmarks/bench_set_metrics.py --beir $TREC_DL --run bm25=RUN --run dense=RUN [--run ...]
[--out F] [--json]`` (runs from ``steadyrank search --run-out``).

For each run: nDCG@10, ERR@10, RA-nWG@10, its novelty-discounted variant, UDCG@10 and Hit@10 (gold =
grade ≥ 1 and, separately, grade 3), with the tie statistics; ERR and nDCG at OrdRankBen's cutoffs
and their spread; RA-nWG@10 over the default grid of α and caps; swap rates of ERR@10, nDCG@10 and
RA-nWG@10 between every pair of runs. The TREC-DL subset carries no source, facet, UDCG or answer
labels, so two are derived here and said so in the result: *facets* are near-duplicate clusters
(passages whose word 5-gram sets have Jaccard ≥ ``--duplicate-jaccard``, joined transitively; a
5-gram in more than 50 passages is a stock phrase and joins nothing), and
*UDCG labels* come from the qrels (utility = grade/3 for relevant passages; distraction = 1 for
judged non-relevant ones, which some pooled system retrieved: a topical distractor). Acc|Hit@K needs
per-query answer correctness from a reader model, which this machine has not: it is not computed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit, write_json  # noqa: E402

from steadyrank.metrics import read_beir_corpus, read_qrels  # noqa: E402

STEADYRANK = [sys.executable, "-m", "steadyrank.serve.cli"]
MEASURES = ["ndcg@10", "err@10", "ra_nwg@10", "ra_nwg_novelty@10", "udcg@10", "hit@10"]
#: A shingle shared by more passages than this is a stock phrase and joins nothing.
COMMON_SHINGLE = 50


def cli(*args: str) -> dict:
    """Run ``steadyrank ARGS --json``; its JSON answer."""
    done = subprocess.run([*STEADYRANK, *args, "--json"], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"steadyrank {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def near_duplicate_facets(texts: dict[str, str], jaccard: float, n: int = 5) -> dict[str, str]:
    """docid → facet: connected components of passages whose word n-gram sets overlap by ≥ ``jaccard``."""
    shingles = {}
    for docid, text in texts.items():
        words = re.findall(r"\w+", text.lower())
        shingles[docid] = {" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))}
    by_shingle: dict[str, list[str]] = {}
    for docid, grams in shingles.items():
        for gram in grams:
            by_shingle.setdefault(gram, []).append(docid)
    parent = {d: d for d in texts}

    def root(d: str) -> str:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    checked: set[tuple[str, str]] = set()
    for docs in by_shingle.values():
        if len(docs) > COMMON_SHINGLE:  # a stock phrase, not a sign of one source
            continue
        for a, b in combinations(docs, 2):
            if (a, b) in checked:
                continue
            checked.add((a, b))
            union = len(shingles[a] | shingles[b])
            if union and len(shingles[a] & shingles[b]) / union >= jaccard:
                parent[root(a)] = root(b)
    return {d: root(d) for d in texts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="BEIR folder (corpus.jsonl, qrels/test.tsv)")
    parser.add_argument("--run", action="append", required=True, metavar="NAME=FILE", help="a TREC run (two or more)")
    parser.add_argument("--grade-map", default="3:5,2:4,1:3,0:1", help="qrels grades → RA-nWG rubric")
    parser.add_argument("--duplicate-jaccard", type=float, default=0.5, help="word 5-gram Jaccard joining two passages")
    parser.add_argument("--swap-trials", type=int, default=1000)
    parser.add_argument("--out", default=None, help="also write the JSON (with its provenance) here")
    parser.add_argument("--json", action="store_true", help="table to stderr, JSON only on stdout")
    args = parser.parse_args()
    runs = dict(item.split("=", 1) for item in args.run)
    if len(runs) < 2:
        raise SystemExit("give two or more runs (--run NAME=FILE)")
    beir = Path(args.beir)
    qrels_path = beir / "qrels" / "test.tsv"
    qrels = read_qrels(qrels_path)
    corpus = {docid: record["text"] for docid, record in read_beir_corpus(beir / "corpus.jsonl").items()}
    facets = near_duplicate_facets(corpus, args.duplicate_jaccard)
    sizes: dict[str, int] = {}
    for facet in facets.values():
        sizes[facet] = sizes.get(facet, 0) + 1

    with tempfile.TemporaryDirectory() as tmp:
        sources = Path(tmp) / "facets.tsv"
        sources.write_text("".join(f"{d}\t{f}\n" for d, f in facets.items()), encoding="utf-8")
        labels = Path(tmp) / "udcg.tsv"
        labels.write_text("".join(f"{q}\t{d}\t{g / 3:.6g}\t-\n" if g >= 1 else f"{q}\t{d}\t-\t1\n"
                                  for q, docs in qrels.items() for d, g in docs.items()), encoding="utf-8")
        common = ["--qrels", str(qrels_path), "--grade-map", args.grade_map, "--sources", str(sources),
                  "--udcg-labels", str(labels)]
        per_run = {}
        for name, path in runs.items():
            main_metrics = cli("evaluate", "--run", path, *common, *sum((["-m", m] for m in MEASURES), []))
            gold3 = cli("evaluate", "--run", path, "--qrels", str(qrels_path), "-m", "hit@10", "-m", "hit@100",
                        "--rel-level", "3")
            spread = cli("evaluate", "--run", path, "--qrels", str(qrels_path), "-m", "err@10", "-m", "ndcg@10",
                         "--cutoffs", "5,10,15,20,30,60")
            per_run[name] = {"metrics": main_metrics["metrics"], "parameters": main_metrics["parameters"],
                             "hit_gold_grade3": gold3["metrics"], "cutoff_spread": spread["cutoff_spread"]}
        first, *others = runs.values()
        compare = sum((["--compare-run", p] for p in others), [])
        grid = cli("evaluate", "--run", first, *compare, *common, "-m", "ra_nwg@10", "-m", "ra_nwg_novelty@10",
                   "--ra-sensitivity")
        swaps = cli("evaluate", "--run", first, *compare, "--qrels", str(qrels_path), "--grade-map", args.grade_map,
                    "-m", "err@10", "-m", "ndcg@10", "-m", "ra_nwg@10", "--swap-rate", "--swap-trials",
                    str(args.swap_trials))

    payload = {
        "data": {"queries_judged": len(qrels), "passages": len(corpus), "runs": list(runs)},
        "derived_labels": {
            "facets": f"near-duplicate clusters: word 5-gram Jaccard >= {args.duplicate_jaccard}, transitively",
            "facets_with_two_or_more_passages": sum(1 for n in sizes.values() if n > 1),
            "passages_in_shared_facets": sum(n for n in sizes.values() if n > 1),
            "udcg": "utility = grade/3 for grade >= 1; distraction = 1 for judged grade 0; unjudged unlabelled",
            "answers": "none: Acc|Hit@K needs per-query answer correctness from a reader model (not computed)",
        },
        "per_run": per_run,
        "ra_nwg_sensitivity": grid["sensitivity"],
        "swap_rate": swaps["swap_rate"],
    }
    names = list(runs)
    rows = []
    for name in names:
        m = per_run[name]["metrics"]
        rows.append([name, *(m[x]["expected"] for x in MEASURES), per_run[name]["hit_gold_grade3"]["hit@10"]["expected"],
                     per_run[name]["cutoff_spread"]["err"]["std"], per_run[name]["cutoff_spread"]["ndcg"]["std"]])
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["run", *MEASURES, "hit@10 (g=3)", "err std@cut", "ndcg std@cut"], rows, json_only=args.json)


if __name__ == "__main__":
    main()
