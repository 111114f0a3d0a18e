"""``steadyrank search``: retrieve (dense, BM25 or hybrid), rerank with dynamic K as the server does, write a TREC run."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, get_args

from tqdm import tqdm

from steadyrank.metrics.io import write_trec_run
from steadyrank.retrieval.corpus import read_queries
from steadyrank.retrieval.denoise import DENOISE_MODES, DenoiseMode
from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.retrieval.fusion import DEFAULT_RRF_K
from steadyrank.retrieval.hygiene import Hygiene
from steadyrank.retrieval.index import open_index
from steadyrank.retrieval.modes import MODES, Mode
from steadyrank.retrieval.pipeline import Ranked, SearchModels, latency_summary, local_models, search
from steadyrank.retrieval.rewrite import LlmRewriter, LlmSettings
from steadyrank.retrieval.routing import ROUTES, Route, RoutingSettings
from steadyrank.serve.cli.commands.index import BUNDLED, add_embedder_argument
from steadyrank.serve.cli.commands.served import add_config_argument, served_compute, served_index, served_run
from steadyrank.serve.cli.options import add_deprecated_alias, require
from steadyrank.serve.output import dumps_json
from steadyrank.serve.runtime.chunking import chunk_planner, chunked_models
from steadyrank.serve.runtime.settings import Precision


def add_reranker_arguments(parser: argparse.ArgumentParser, *, optional: bool) -> None:
    """``--rerank`` / ``--rerank-precision`` (shared with ``route calibrate``); ``optional``: also
    ``--no-rerank``. Unset, both are the served settings' primary reranker (:mod:`serve.cli.commands.served`)."""
    parser.add_argument("--rerank", metavar="MODEL", default=None,
                        help=f"reranker model directory (cross-encoder, causal-LM reranker or bi-encoder), or "
                             f"'{BUNDLED}' for the bundled all-MiniLM-L6-v2; its other settings (max_length, "
                             f"scoring, …) are the served reranker's (default: the served reranker, the embedder "
                             f"when the settings name none)")
    if optional:
        parser.add_argument("--no-rerank", action="store_true",
                            help="write the retrieval order (no server serves it: /v1/search always reranks)")
    parser.add_argument("--rerank-precision", choices=get_args(Precision), default=None,
                        help="reranker forward precision; scores are upcast to FP32 before φ (HPS) (default: the "
                             "served reranker's, auto = bf16 where the device has fast BF16, else fp32)")


def add_routing_arguments(parser: argparse.ArgumentParser) -> None:
    """The served settings file, depths, routing file, mode, RRF and embedder (shared with ``route calibrate``);
    each unset one is the served settings' (:mod:`serve.cli.commands.served`)."""
    add_config_argument(parser)
    parser.add_argument("--depth", type=int, default=None,
                        help=f"candidates retrieved per query = k_high, the most that are reranked (default: the "
                             f"served routing's, {RoutingSettings.k_high} unless set)")
    parser.add_argument("--k-low", type=int, default=None,
                        help=f"candidates always reranked, kept as given (default: the served routing's "
                             f"({RoutingSettings.k_low} unless set) raised to --top-n, as /v1/search does)")
    parser.add_argument("--top-n", type=int, default=None,
                        help=f"results a client reads (a request's top_n); the tie signal watches this cutoff "
                             f"(default: the served routing's, {RoutingSettings.top_n} unless set)")
    parser.add_argument("--route-settings", metavar="FILE", default=None,
                        help="routing settings JSON written by 'steadyrank route calibrate' (default: the served "
                             "routing section)")
    parser.add_argument("--mode", choices=MODES, default=None,
                        help="retrieval mode (default: the served search.default_mode, hybrid unless set)")
    parser.add_argument("--rrf-k", type=float, default=None,
                        help=f"RRF constant k for hybrid (default: the served search.rrf_k, {DEFAULT_RRF_K:g} unless set)")
    parser.add_argument("--rrf-weights", type=_weights, default=None, metavar="WD,WB",
                        help="RRF weights of the dense and BM25 lists (default: the served search.rrf_weights, 1,1 "
                             "unless set)")
    add_embedder_argument(parser, served=True)


def add_denoise_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """``--denoise-llm-url`` / ``--denoise-llm-model`` (shared with ``probe noise``)."""
    parser.add_argument("--denoise-llm-url", default=None, help="OpenAI-compatible base URL (…/v1) of --denoise llm")
    parser.add_argument("--denoise-llm-model", default=None, help="chat model name of --denoise llm")


def llm_rewriter_arg(args: argparse.Namespace) -> LlmRewriter | None:
    """The chat rewriter of ``--denoise llm`` (None for the other modes)."""
    if args.denoise != "llm":
        return None
    if not (args.denoise_llm_url and args.denoise_llm_model):
        raise ValueError("--denoise llm needs --denoise-llm-url and --denoise-llm-model")
    return LlmRewriter(LlmSettings(base_url=args.denoise_llm_url, model=args.denoise_llm_model))


def add_hygiene_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dedup-threshold`` / ``--boost-weight``: the optional hygiene stages (:mod:`retrieval.hygiene`)."""
    parser.add_argument("--dedup-threshold", type=_threshold, default=None, metavar="COSINE|off",
                        help="near-duplicate suppression: a candidate whose stored-vector cosine with an earlier kept "
                             "candidate is ≥ COSINE is not reranked and is served after every kept candidate; off to "
                             "switch it off (default: the served search.dedup_threshold, off unless set)")
    parser.add_argument("--boost-weight", type=_nonnegative, default=None, metavar="W",
                        help="lexical boost: rank key + W · query-term overlap (share of the query's BM25 terms in the "
                             "passage), W in rank-key units; 0 = off (default: the served search.boost_weight, 0 unless "
                             "set)")


def _threshold(text: str) -> float | str:
    if text == "off":
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not -1.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a cosine in [-1, 1] or off, got {text!r}")
    return value


def _nonnegative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number ≥ 0, got {text!r}")
    return value


def _weights(text: str) -> tuple[float, float]:
    try:
        dense, sparse = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two comma-separated weights like 1,0.5, got {text!r}") from None
    return dense, sparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search",
        help="retrieve and rerank queries against an index; write a TREC run and RUN.json",
        description=(
            "Search every query of QUERIES (a queries file or a BEIR folder) in the index as POST "
            "/v1/search does on a server started with the same settings (--config; every flag left out "
            "is the served setting, and the settings in force are printed and written to RUN.json). Hybrid "
            "fuses the dense and BM25 top DEPTH lists with RRF. The first k_low "
            "candidates are reranked; route 'dynamic' reranks up to DEPTH only when an uncertainty "
            "signal fires (small dense margin, high reranker entropy, tie at top_n, low dense/BM25 "
            "overlap), 'fixed50' never, 'fixed100' always. Writes the TREC run to RUN (--run-out) and, per "
            "query, the candidates reranked, routing signals and reasons, and stage latencies to RUN.json."
        ),
    )
    parser.add_argument("--index", default=None, metavar="DIR",
                        help="index directory (default: the served index, built first as the server would)")
    parser.add_argument("--queries", required=True,
                        help="queries file (_id/id and text: JSONL, .jsonl.gz, TSV/CSV, Parquet) or BEIR folder")
    parser.add_argument("--run-out", dest="run_out", default=None, metavar="FILE",
                        help="TREC run file to write (FILE.json beside it); read it with 'steadyrank evaluate --run'")
    add_deprecated_alias(parser, "--out", "--run-out", "run_out")
    require(parser, "run_out", "--run-out")
    add_routing_arguments(parser)
    add_reranker_arguments(parser, optional=True)
    parser.add_argument("--max-chunks-per-doc", type=int, default=None, metavar="N",
                        help="chunked reranking: each candidate cut into at most N overlapping chunks of the "
                             "reranker's tokens (the served chunking settings' sizes), its score its best chunk's, as "
                             "/v1/rerank's max_chunks_per_doc (default: the served chunking.default_max_chunks_per_doc, "
                             "1 = no chunking)")
    parser.add_argument("--route", choices=ROUTES, default=None,
                        help="dynamic, fixed50 (k_low) or fixed100 (all DEPTH) (default: the served routing.route, "
                             "dynamic unless set)")
    parser.add_argument("--denoise", choices=DENOISE_MODES, default=None,
                        help="query denoising before search: off, rules (greetings, fillers, apologies, sign-offs, "
                             "emoji out; names, numbers, quotes kept) or llm (a chat model restates the need, falling "
                             "back to rules) (default: the served search.denoise, off unless set)")
    add_denoise_llm_arguments(parser)
    add_hygiene_arguments(parser)
    parser.add_argument("--tag", default="steadyrank", help="run tag column (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.no_rerank and (args.route is not None or args.rerank is not None or args.rerank_precision is not None):
        raise ValueError("--no-rerank conflicts with --route, --rerank and --rerank-precision (nothing is reranked)")
    if args.no_rerank and args.boost_weight:
        raise ValueError("--no-rerank conflicts with --boost-weight (the boost adds to rank keys)")
    served = served_run(args)
    chunking = served.settings.chunking
    per_doc = chunking.default_max_chunks_per_doc if args.max_chunks_per_doc is None else args.max_chunks_per_doc
    if not 1 <= per_doc <= chunking.max_chunks_per_doc:
        raise ValueError(f"--max-chunks-per-doc must be 1 to {chunking.max_chunks_per_doc} (chunking.max_chunks_per_doc)")
    print(served.describe(), file=sys.stderr)
    queries = read_queries(args.queries)
    index = served_index(served)
    from steadyrank.serve.runtime import load_embedder, load_scorer

    compute = served_compute(served)  # before the models load, as in a replica
    reranker = None if served.reranker is None else load_scorer(served.reranker, calibration=served.calibration)
    if reranker is not None:
        print(f"reranker precision: {reranker.precision_choice.line()}", file=sys.stderr)
    stored = served.stored_vectors
    embedder = load_embedder(served.embedder) if served.mode != "bm25" or stored else None
    rewriter = None if served.denoise_llm is None else LlmRewriter(served.denoise_llm)
    with open_index(index, embedder) as store:
        models = local_models(store, embedder, reranker, rrf_k=served.rrf_k, rrf_weights=served.rrf_weights,
                              stored_vectors=stored, rewriter=rewriter,
                              cutoff=None if reranker is None else reranker.cutoff)
        if reranker is not None and served.reranker is not None and per_doc > 1:
            from steadyrank.serve.server.http.dialects.documents import TokenCutter

            models = chunked_models(models, chunk_planner(TokenCutter(served.reranker).encoder(), reranker.input_room(),
                                                          chunking.chunk_tokens, chunking.overlap_tokens, per_doc))
        search_all = _search_all(queries, served.mode, models, served.policy, served.route, served.denoise,
                                 served.hygiene)
        ranked = compute.submit(asyncio.run, search_all).result()
    trec = {qid: dict(zip(r.doc_ids, map(float, r.scores), strict=True)) for qid, r in ranked.items()}
    per_query = {qid: query_report(r) for qid, r in ranked.items()}
    write_trec_run(args.run_out, trec, tag=args.tag)
    k_values = [q["k_reranked"] for q in per_query.values()]
    summary = {
        "run": args.run_out,
        "report": f"{args.run_out}.json",
        "index": str(index),
        "mode": served.mode,
        "depth": served.policy.k_high,
        "reranker": None if served.reranker is None else (served.reranker.path or BUNDLED),
        "route": served.route if reranker is not None else None,
        "denoise": served.denoise,
        "max_chunks_per_doc": per_doc if reranker is not None else None,
        "routing": served.policy.to_json() if reranker is not None else None,
        "settings": served.to_json(),
        "queries": len(per_query),
        "mean_k_reranked": sum(k_values) / len(k_values),
        "escalation_rate": sum(bool(q.get("escalated")) for q in per_query.values()) / len(per_query),
        "latency": latency_summary([r.timings for r in ranked.values()]),
    }
    atomic_write_bytes(Path(f"{args.run_out}.json"), (dumps_json({**summary, "per_query": per_query}) + "\n").encode("utf-8"))
    if args.json:
        print(dumps_json(summary))
    else:
        print(
            f"wrote {args.run_out} ({len(per_query)} queries, mode {served.mode}, depth {served.policy.k_high}); "
            f"mean candidates reranked {summary['mean_k_reranked']:.1f}, "
            f"escalated {summary['escalation_rate']:.0%}; details in {args.run_out}.json"
        )
    return 0


async def _search_all(queries: dict[str, str], mode: Mode, models: SearchModels, settings: RoutingSettings,
                      route: Route, denoise: DenoiseMode, hygiene: Hygiene) -> dict[str, Ranked]:
    out = {}
    for qid, text in tqdm(queries.items(), desc="searching", unit="query", file=sys.stderr, dynamic_ncols=True):
        out[qid] = await search(text, mode, models, settings, route, denoise, hygiene)
    return out


def query_report(ranked: Ranked) -> dict[str, Any]:
    """One query of ``RUN.json``: routing facts, stage and retrieval timings (ms) and, when reranked,
    every reranked candidate in served order (``id``, ``relevance_score``, ``rank_key``: the
    ``candidates`` of ``/v1/search``)."""
    report: dict[str, Any] = {"k_reranked": ranked.k, "n_candidates": len(ranked.candidates.doc_ids)}
    if ranked.query is not None:
        report["query"] = ranked.query.to_json()
    if ranked.decision is not None:
        signals, ranking = ranked.signals, ranked.ranking
        assert signals is not None and ranking is not None  # rank_pool sets them with the decision
        report.update({
            "escalated": ranked.decision.escalated,
            "reasons": list(ranked.decision.reasons),
            "signals": signals.to_json(),
            "tie_at_cutoff": ranking.tie_at_cutoff,
            "rescored_ties": ranking.rescored,
            "cutoff_certified": ranking.certified,
            "rescored_near_cutoff": ranking.near_rescored,
            "candidates": [{"id": ranked.candidates.doc_ids[i], "relevance_score": float(ranked.rerank_scores[i]),
                            "rank_key": float(ranked.rerank_keys[i])} for i in ranked.served()],
        })
    if ranked.demoted:
        report["suppressed"] = dict(ranked.demoted)
    report["stages_ms"] = {k: v * 1000 for k, v in ranked.timings.items()}
    report["retrieval_ms"] = {k: v * 1000 for k, v in ranked.candidates.timings.items()}
    return report
