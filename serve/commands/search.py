"""``steadyrank search``: retrieve (dense, BM25 or hybrid), optionally rerank with dynamic K, write a TREC run."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from steadyrank.metrics.io import write_trec_run
from steadyrank.retrieval.corpus import read_queries
from steadyrank.retrieval.denoise import DEFAULT_DENOISE, DENOISE_MODES, DenoiseMode
from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.retrieval.fusion import DEFAULT_RRF_K
from steadyrank.retrieval.index import open_index
from steadyrank.retrieval.modes import MODES, Mode
from steadyrank.retrieval.pipeline import Ranked, SearchModels, latency_summary, local_models, search
from steadyrank.retrieval.protocols import Embedder, Reranker
from steadyrank.retrieval.rewrite import LlmRewriter, LlmSettings
from steadyrank.retrieval.routing import ROUTES, Route, RoutingSettings, load_settings
from steadyrank.serve.commands.index import BUNDLED, add_embedder_argument, load_embedder_arg, load_reranker_arg
from steadyrank.serve.commands.options import add_deprecated_alias, require
from steadyrank.serve.output import dumps_json


def add_reranker_arguments(parser: argparse.ArgumentParser, *, default: str | None) -> None:
    """``--rerank`` / ``--rerank-precision`` (shared with ``route calibrate``)."""
    parser.add_argument("--rerank", metavar="MODEL", default=default,
                        help=f"reranker model directory (cross-encoder, causal-LM reranker or bi-encoder), "
                             f"or '{BUNDLED}' for the bundled all-MiniLM-L6-v2 scored in FP32 (HPS)"
                             + (f" (default {default})" if default else "; without it the retrieval order is written"))
    parser.add_argument("--rerank-precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                        help="reranker forward precision; scores are upcast to FP32 before φ (HPS) (default %(default)s)")


def add_routing_arguments(parser: argparse.ArgumentParser) -> None:
    """Depths and the settings file (shared with ``route calibrate``)."""
    parser.add_argument("--depth", type=int, default=RoutingSettings.k_high,
                        help="candidates retrieved per query = k_high, the most that are reranked (default %(default)s)")
    parser.add_argument("--k-low", type=int, default=None,
                        help=f"candidates always reranked (default: the settings file's, else {RoutingSettings.k_low})")
    parser.add_argument("--top-n", type=int, default=None,
                        help=f"results a client reads; the tie signal watches this cutoff (default {RoutingSettings.top_n})")
    parser.add_argument("--route-settings", metavar="FILE", default=None,
                        help="routing settings JSON written by 'steadyrank route calibrate' (default: built-in thresholds)")
    parser.add_argument("--mode", choices=MODES, default="hybrid", help="retrieval mode (default %(default)s)")
    parser.add_argument("--rrf-k", type=float, default=DEFAULT_RRF_K, help="RRF constant k for hybrid (default %(default)s)")
    parser.add_argument("--rrf-weights", type=_weights, default=(1.0, 1.0), metavar="WD,WB",
                        help="RRF weights of the dense and BM25 lists (default 1,1)")
    add_embedder_argument(parser)


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


def routing_settings(args: argparse.Namespace) -> RoutingSettings:
    """Settings file (or defaults) with ``k_high = --depth`` and the ``--k-low``/``--top-n`` overrides."""
    settings = load_settings(args.route_settings) if args.route_settings else RoutingSettings()
    k_low = args.k_low if args.k_low is not None else min(settings.k_low, args.depth)
    top_n = args.top_n if args.top_n is not None else settings.top_n
    return replace(settings, k_high=args.depth, k_low=k_low, top_n=top_n)


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
            "Search every query of QUERIES (a queries file or a BEIR folder) in the index. Hybrid "
            "fuses the dense and BM25 top DEPTH lists with RRF. With --rerank, the first k_low "
            "candidates are reranked; route 'dynamic' reranks up to DEPTH only when an uncertainty "
            "signal fires (small dense margin, high reranker entropy, tie at top_n, low dense/BM25 "
            "overlap), 'fixed50' never, 'fixed100' always. Writes the TREC run to RUN (--run-out) and, per "
            "query, the candidates reranked, routing signals and reasons, and stage latencies to RUN.json."
        ),
    )
    parser.add_argument("--index", required=True, metavar="DIR", help="index directory")
    parser.add_argument("--queries", required=True,
                        help="queries file (_id/id and text: JSONL, .jsonl.gz, TSV/CSV, Parquet) or BEIR folder")
    parser.add_argument("--run-out", dest="run_out", default=None, metavar="FILE",
                        help="TREC run file to write (FILE.json beside it); read it with 'steadyrank evaluate --run'")
    add_deprecated_alias(parser, "--out", "--run-out", "run_out")
    require(parser, "run_out", "--run-out")
    add_routing_arguments(parser)
    add_reranker_arguments(parser, default=None)
    parser.add_argument("--route", choices=ROUTES, default=None,
                        help="with --rerank: dynamic (default), fixed50 (k_low) or fixed100 (all DEPTH)")
    parser.add_argument("--denoise", choices=DENOISE_MODES, default=DEFAULT_DENOISE,
                        help="query denoising before search: off, rules (greetings, fillers, apologies, sign-offs, "
                             "emoji out; names, numbers, quotes kept) or llm (a chat model restates the need, falling "
                             "back to rules) (default %(default)s)")
    add_denoise_llm_arguments(parser)
    parser.add_argument("--tag", default="steadyrank", help="run tag column (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.route is not None and args.rerank is None:
        raise ValueError("--route needs --rerank (without a reranker nothing is routed)")
    settings = routing_settings(args)
    route: Route = args.route or "dynamic"  # argparse choices: ROUTES
    queries = read_queries(args.queries)
    embedder = None if args.mode == "bm25" else load_embedder_arg(args.embedder, args.embedder_precision, args.embedder_prompts)
    reranker = None if args.rerank is None else load_reranker_arg(args.rerank, args.rerank_precision)
    rewriter = llm_rewriter_arg(args)
    with open_index(args.index, embedder) as store:
        stored = embedder is not None and reranker is not None and _same_vectors(reranker, embedder)
        models = local_models(store, embedder, reranker, rrf_k=args.rrf_k, rrf_weights=args.rrf_weights,
                              stored_vectors=stored, rewriter=rewriter)
        ranked = asyncio.run(_search_all(queries, args.mode, models, settings, route, args.denoise))
    trec = {qid: dict(zip(r.doc_ids, map(float, r.scores), strict=True)) for qid, r in ranked.items()}
    per_query = {qid: query_report(r) for qid, r in ranked.items()}
    write_trec_run(args.run_out, trec, tag=args.tag)
    k_values = [q["k_reranked"] for q in per_query.values()]
    summary = {
        "run": args.run_out,
        "report": f"{args.run_out}.json",
        "index": args.index,
        "mode": args.mode,
        "depth": args.depth,
        "reranker": args.rerank,
        "route": route if reranker is not None else None,
        "denoise": args.denoise,
        "routing": settings.to_json() if reranker is not None else None,
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
            f"wrote {args.run_out} ({len(per_query)} queries, mode {args.mode}, depth {args.depth}); "
            f"mean candidates reranked {summary['mean_k_reranked']:.1f}, "
            f"escalated {summary['escalation_rate']:.0%}; details in {args.run_out}.json"
        )
    return 0


def _same_vectors(reranker: Reranker, embedder: Embedder) -> bool:
    """The reranker is the embedder's model (rerank from the stored vectors). Both come from the runtime
    loaders (``load_reranker_arg``, ``load_embedder_arg``), whose models carry their resolved settings."""
    from steadyrank.serve.runtime.embedder import Embedder as LoadedEmbedder
    from steadyrank.serve.runtime.scorer import Scorer

    assert isinstance(reranker, Scorer) and isinstance(embedder, LoadedEmbedder)
    return reranker.settings.same_vectors(embedder.settings)


async def _search_all(queries: dict[str, str], mode: Mode, models: SearchModels, settings: RoutingSettings,
                      route: Route, denoise: DenoiseMode) -> dict[str, Ranked]:
    out = {}
    for qid, text in tqdm(queries.items(), desc="searching", unit="query", file=sys.stderr, dynamic_ncols=True):
        out[qid] = await search(text, mode, models, settings, route, denoise)
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
            "candidates": [{"id": ranked.candidates.doc_ids[i], "relevance_score": float(ranked.rerank_scores[i]),
                            "rank_key": float(ranked.rerank_keys[i])} for i in ranked.served()],
        })
    report["stages_ms"] = {k: v * 1000 for k, v in ranked.timings.items()}
    report["retrieval_ms"] = {k: v * 1000 for k, v in ranked.candidates.timings.items()}
    return report
