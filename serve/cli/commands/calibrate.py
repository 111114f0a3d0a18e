"""``steadyrank calibrate``: fit calibrated scores (P(relevant) from a reranker's FP32 rank key) on a golden set."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from steadyrank.metrics.calibration import DEFAULT_BINS
from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.serve.cli.commands.search import add_reranker_arguments
from steadyrank.serve.cli.commands.served import add_config_argument, served_run
from steadyrank.serve.cli.options import add_grade_map_argument
from steadyrank.serve.output import dumps_json, format_table

#: Rubric grade from which a judged document counts as relevant (the ranked metrics' "relevant").
DEFAULT_THRESHOLD = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="fit calibrated scores: P(relevant) from a reranker's FP32 rank key, on a golden set",
        description=(
            "Score every judged (query, document) pair of a golden set with the reranker (the served one "
            "unless --rerank names another, in its served precision), split the judged queries into a fit "
            "half and a held-out half (seeded), fit a Platt map σ(a·key + b) of 'rubric grade ≥ --threshold' "
            "on the fit half's FP32 rank keys (refused unless a > 0: strictly increasing, so it keeps the "
            "ranking), and report ECE, Brier score and a reliability diagram on the held-out half. Writes the "
            "calibration file (--calibration-out; the model's score_calibration setting serves it as calibrated_score) "
            "and the diagram (--plot-out)."),
    )
    parser.add_argument("--golden", default=None, metavar="PATH",
                        help="golden set: JSONL of {query_id, query, judgments} or a BEIR folder (default: the "
                             "embedded demo golden set)")
    parser.add_argument("--corpus", default=None, metavar="PATH",
                        help="the corpus the golden set judges: a corpus file or BEIR folder holding every judged "
                             "document (default: the embedded demo corpus when --golden is the demo set, else the "
                             "--golden folder when it is a BEIR folder)")
    parser.add_argument("--split", default="test", help="qrels split of a BEIR golden folder (default %(default)s)")
    add_grade_map_argument(parser, default=None,
                           help="map the golden set's grades onto the 1-5 rubric, e.g. 3:5,2:4,1:3,0:1 for TREC DL "
                                "(default: grades are rubric grades)")
    parser.add_argument("--threshold", type=int, default=DEFAULT_THRESHOLD, choices=range(2, 6), metavar="GRADE",
                        help="rubric grade from which a document counts as relevant, 2-5 (default %(default)s: "
                             "rubric ≥ 3, the ranked metrics' 'relevant')")
    parser.add_argument("--calibration-out", required=True, metavar="FILE",
                        help="calibration file to write (JSON; set it as the model's score_calibration)")
    parser.add_argument("--plot-out", default=None, metavar="FILE",
                        help="reliability diagram to write (PNG; default: --calibration-out with .png)")
    parser.add_argument("--fit-fraction", type=float, default=0.5,
                        help="share of the judged queries the map is fitted on; the others are held out for the "
                             "report (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split by query (default %(default)s)")
    parser.add_argument("--bins", type=int, default=DEFAULT_BINS,
                        help="equal-width bins over [0, 1] of ECE and the diagram (default %(default)s)")
    add_config_argument(parser)
    add_reranker_arguments(parser, optional=False)
    parser.add_argument("--json", action="store_true", help="print the calibration file as JSON")
    parser.set_defaults(func=run)


def _corpus_path(args: argparse.Namespace) -> Path:
    from steadyrank.serve.server.default import DEMO_CORPUS

    if args.corpus is not None:
        return Path(args.corpus)
    if args.golden is None:
        return DEMO_CORPUS
    if Path(args.golden).is_dir():
        return Path(args.golden)
    raise ValueError("--corpus is required with a golden set file: the corpus holding the documents it judges")


def _golden_facts(args: argparse.Namespace) -> dict[str, Any]:
    """The golden set's id (its file or folder name), path and sha256 (of the file, or of the BEIR
    folder's queries and the split's qrels)."""
    from steadyrank.serve.server.quality.golden_sets import DEMO_GOLDEN
    from steadyrank.serve.tools.score_calibration.pairs import file_digest

    path = DEMO_GOLDEN if args.golden is None else Path(args.golden)
    if path.is_dir():
        digest = "+".join(file_digest(p)[:32] for p in (path / "queries.jsonl", path / "qrels" / f"{args.split}.tsv"))
        return {"id": f"{path.name}:{args.split}", "path": str(path), "sha256": digest}
    return {"id": "demo" if args.golden is None else path.name, "path": str(path), "sha256": file_digest(path)}


def _model_facts(folder: Path) -> tuple[str | None, str]:
    """The model folder's Hub commit (a Hub cache snapshot folder's name, else None) and its files' sha256."""
    from steadyrank.serve.runtime.hub import hub_id_of_cache_folder
    from steadyrank.serve.tools.score_calibration.pairs import file_digest

    folder = folder.resolve()
    return (folder.name if hub_id_of_cache_folder(folder) else None), file_digest(folder)


def run(args: argparse.Namespace) -> int:
    from steadyrank.retrieval.corpus import read_corpus
    from steadyrank.serve.runtime import load_scorer
    from steadyrank.serve.runtime.score_calibration import ScoreCalibration
    from steadyrank.serve.server.quality.golden_sets import load_golden
    from steadyrank.serve.tools.score_calibration.pairs import judged_pairs
    from steadyrank.serve.tools.score_calibration.plot import plot_reliability
    from steadyrank.serve.tools.score_calibration.run import fit_and_assess, plan, score_pairs

    if args.bins < 1:
        raise ValueError(f"--bins must be ≥ 1, got {args.bins}")
    out = Path(args.calibration_out)
    plot = Path(args.plot_out) if args.plot_out else out.with_suffix(".png")
    grade_map = None if args.grade_map is None else {int(k): int(v) for k, v in args.grade_map.items()}
    golden = load_golden(args.golden, split=args.split, grade_map=grade_map)
    corpus = read_corpus(_corpus_path(args), strict=False)
    if corpus.warning():
        print(f"warning: {corpus.warning()}", file=sys.stderr)
    pairs = judged_pairs(golden, {d.id: d.full_text for d in corpus.documents})
    split = plan(pairs, threshold=args.threshold, fit_fraction=args.fit_fraction, seed=args.seed)  # before any model work
    served = served_run(args)
    assert served.reranker is not None  # calibrate has no --no-rerank
    scorer = load_scorer(served.reranker, calibration=served.calibration)
    print(f"reranker {scorer.model_id}: {scorer.precision_choice.line()}; {len(pairs)} judged pairs of "
          f"{len(golden)} queries", file=sys.stderr)

    def score(query: str, texts: list[str]) -> tuple[Any, Any]:
        scored = scorer.score([(query, t) for t in texts])
        return scored.keys, scored.scores

    def progress(queries: list[str]) -> Any:
        return tqdm(queries, desc="scoring judged pairs", unit="query", file=sys.stderr)

    keys, scores = score_pairs(pairs, score, progress)
    fitted = fit_and_assess(pairs, keys, scores, split, n_bins=args.bins)
    revision, digest = _model_facts(served.reranker.model_path())
    calibration = ScoreCalibration(
        slope=fitted.platt.slope, intercept=fitted.platt.intercept, model_id=scorer.model_id,
        precision=scorer.precision, scoring=scorer.scoring, threshold=args.threshold, golden=_golden_facts(args),
        model_revision=revision, model_digest=digest, held_out=fitted.held_out,
        fit={**fitted.fit, "corpus": str(_corpus_path(args)), "plot": str(plot)})
    atomic_write_bytes(out, (json.dumps(calibration.to_json(), indent=2) + "\n").encode())
    plot_reliability(fitted.held_out, f"{scorer.model_id} ({scorer.precision}), grade ≥ {args.threshold}; "
                                      f"held-out {fitted.held_out['queries']} queries", plot)
    if args.json:
        print(dumps_json(calibration.to_json()))
        return 0
    h = fitted.held_out
    raw = h["relevance_score"]
    print(format_table(["", "value"], [
        ["model", f"{scorer.model_id} ({scorer.precision}, {scorer.scoring})"],
        ["map", f"σ({fitted.platt.slope:.4g}·key + {fitted.platt.intercept:.4g})"],
        ["fit half", f"{fitted.fit['fit_pairs']} pairs, {len(fitted.fit['fit_query_ids'])} queries, "
                     f"{fitted.fit['fit_relevant']} relevant"],
        ["held-out half", f"{h['pairs']} pairs, {h['queries']} queries, {h['relevant']} relevant"],
        [f"held-out ECE ({h['bins']} bins)", f"{h['ece']:.4f}"],
        ["held-out Brier", f"{h['brier']:.4f}"],
        ["  relevance_score ECE / Brier", "-" if raw is None else f"{raw['ece']:.4f} / {raw['brier']:.4f}"],
        ["  base-rate Brier", f"{h['base_rate_brier']:.4f}"],
    ]))
    print(f"wrote {out} and {plot}")
    return 0
