"""``steadyrank probe names`` / ``probe noise``: Δ-margin identity probes and conversational-noise probes.

See docs/guides/probes.md. The probe logic lives in :mod:`serve.tools.probes`; this module picks the
similarity (in process: a model directory or ``bundled``; or a running server: ``--url``), runs, and
prints (table, ``--json``, ``--plot``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any, get_args

import numpy as np
from tqdm import tqdm

from steadyrank.metrics.aggregate import bootstrap_ci, paired_bootstrap
from steadyrank.metrics.evaluate import evaluate
from steadyrank.metrics.io import read_qrels
from steadyrank.retrieval.corpus import read_corpus, read_queries
from steadyrank.retrieval.denoise import DENOISE_MODES, DenoiseMode
from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.retrieval.pipeline import local_models, search
from steadyrank.retrieval.protocols import Embedder, Reranker
from steadyrank.retrieval.rewrite import LlmRewriter
from steadyrank.retrieval.routing import RoutingSettings
from steadyrank.serve.cli.commands.index import BUNDLED, load_embedder_arg, load_reranker_arg
from steadyrank.serve.cli.commands.search import add_denoise_llm_arguments, llm_rewriter_arg
from steadyrank.serve.cli.options import add_deprecated_alias, add_grade_map_argument
from steadyrank.serve.output import dumps_json, format_table
from steadyrank.serve.runtime.settings import Precision
from steadyrank.serve.tools.probes import phrasings
from steadyrank.serve.tools.probes.ablations import ABLATIONS, parse_ablations
from steadyrank.serve.tools.probes.bundles import LANGUAGES, generate, load_templates, read_bundles, read_topics
from steadyrank.serve.tools.probes.margins import MIN_BASE_DELTA, summarize
from steadyrank.serve.tools.probes.noise import LEVELS, variants
from steadyrank.serve.tools.probes.phrasings import HALVES
from steadyrank.serve.tools.probes.remote import remote_embeddings, remote_encode, remote_rerank
from steadyrank.serve.tools.probes.retrieval import parse_ks, probe_retrieval
from steadyrank.serve.tools.probes.run import Similarity, cosine_rows, embedding_similarity, run_probes

NOISE_MEASURES = ("ndcg@10", "ra_nwg@10", "recall@100")
#: The ``--queries`` / ``--beir`` value naming the embedded demo set (serve/data/demo).
DEMO = "demo"


def _add_model_arguments(parser: argparse.ArgumentParser, *, kinds: bool) -> None:
    parser.add_argument("--model", default=BUNDLED, metavar="DIR",
                        help=f"model directory, or '{BUNDLED}' for the bundled all-MiniLM-L6-v2 (default %(default)s)")
    if kinds:
        parser.add_argument("--kind", choices=["embedder", "reranker"], default="embedder",
                            help="similarity: embedder = cosine of the vectors; reranker = the FP32 rank key "
                                 "(HPS) of each (query, candidate) pair (default %(default)s)")
    parser.add_argument("--precision", choices=get_args(Precision), default="auto",
                        help="forward precision of the in-process model (auto: bf16 where the device has fast BF16, "
                             "else fp32; vectors and keys are upcast to FP32, HPS) (default %(default)s)")
    parser.add_argument("--url", default=None,
                        help="probe a running steadyrank server instead (its /v1/embeddings, or /v1/rerank with "
                             "--kind reranker); --model then names a served model (default: the served one)")
    parser.add_argument("--api-key", default=None, help="bearer token of --url")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("probe", help="Δ-margin name-identity probes and conversational-noise probes",
                                   description="Diagnostics of how a model holds a proper-name identity signal "
                                               "(names) and how conversational noise moves a query (noise).")
    sub = parser.add_subparsers(dest="probe", metavar="PROBE", required=True)
    names = sub.add_parser(
        "names", help="Δname/Δtopic/Δboth under every ablation, per language",
        description="Per query a 5-item bundle (C1 right author + topic, C2a/C2b impostors, C3 wrong topic, "
                    "C4 both wrong); Δname = s(C1) − max s(C2a,C2b), Δtopic = s(C1) − s(C3), Δboth = s(C1) − s(C4), "
                    "under each ablation; ΔΔ% = relative change of Δname against the base rendering.")
    names.add_argument("--bundles", metavar="FILE", default=None,
                       help="probe bundles JSONL (one bundle a line); default: generate them")
    names.add_argument("--queries", type=int, default=100, help="bundles generated per language and run (default %(default)s)")
    names.add_argument("--runs", type=int, default=1, help="independent generations (seeds) pooled (default %(default)s)")
    names.add_argument("--lang", default="en,fr", help=f"languages generated, of {','.join(LANGUAGES)} (default %(default)s)")
    names.add_argument("--topics", metavar="PATH", default=None,
                       help="topics: a text file (one a line) or a BEIR corpus (its titles); default: the shipped lists")
    names.add_argument("--templates", metavar="FILE", default=None,
                       help="templates JSON {lang: {query, candidate, candidate_author_first, author_label, mask}} "
                            "(default: the shipped ones)")
    names.add_argument("--write-bundles", metavar="FILE", default=None, help="also write the bundles used as JSONL")
    names.add_argument("--ablations", default=None, help=f"comma-separated subset of {','.join(ABLATIONS)} (default: all)")
    names.add_argument("--min-base", type=float, default=MIN_BASE_DELTA,
                       help="queries with base Δname below this are left out of ΔΔ%% (default %(default)s)")
    names.add_argument("--plot-out", metavar="FILE", default=None, help="write a ΔΔ%% bar plot (PNG)")
    add_deprecated_alias(names, "--plot", "--plot-out", "plot_out")
    names.add_argument("--retrieval", action="store_true",
                       help="also index each ablation's bundles (every candidate a passage) and search each query "
                            "through the search pipeline: Recall@k of the right passage (C1) beside Δname; "
                            "in process only (a --kind reranker reranks what the bundled embedder retrieves)")
    names.add_argument("--mode", choices=["dense", "bm25", "hybrid"], default="dense",
                       help="--retrieval's first stage (default %(default)s)")
    names.add_argument("--recall-k", default="1,10", metavar="K,K",
                       help="--retrieval's Recall cutoffs; the largest is the search depth (default %(default)s)")
    _add_model_arguments(names, kinds=True)
    names.set_defaults(func=run_names)

    noise = sub.add_parser(
        "noise", help="cosine of noisy queries to the clean ones, and the retrieval effect with and without denoising",
        description="Noisy variants of each query at levels 0 (none), 2 (a greeting and a filler) and 4 (greetings, "
                    "apologies, a digression, a sign-off, emoji), seeded; the cosine of each to its clean query; with "
                    "--beir, nDCG@10, RA-nWG@10 and Recall@100 (tie-aware) of clean, noisy and denoised queries "
                    "through the search pipeline, with paired bootstrap CIs against the clean queries.")
    noise.add_argument("--queries", default=DEMO, metavar="PATH",
                       help=f"queries JSONL or a BEIR folder, or '{DEMO}' for the embedded demo set's 40 queries "
                            "(default %(default)s)")
    noise.add_argument("--lang", choices=LANGUAGES, default="en", help="noise template language (default %(default)s)")
    noise.add_argument("--noise", choices=("templates", *HALVES), default="templates",
                       help="the noise: the measurement templates (--lang), or a half of the independently written "
                            "phrasings (English) that the denoiser was tuned on (dev) or never saw (heldout); a half "
                            "also keeps only its half of the queries (default %(default)s)")
    noise.add_argument("--levels", default="0,2,4", help="noise levels, of 0,2,4 (default %(default)s)")
    noise.add_argument("--beir", metavar="DIR", default=None,
                       help=f"BEIR folder (corpus.jsonl, qrels/SPLIT.tsv) for the retrieval effect, or '{DEMO}' for the "
                            "embedded demo corpus and judgments")
    noise.add_argument("--split", default="test", help="qrels split (default %(default)s)")
    noise.add_argument("--index", metavar="DIR", default=None,
                       help="an index of --beir's corpus built with the same model (default: build one in a temporary folder)")
    noise.add_argument("--mode", choices=["dense", "bm25", "hybrid"], default="dense", help="retrieval mode (default %(default)s)")
    noise.add_argument("--depth", type=int, default=100, help="documents retrieved per query (default %(default)s)")
    add_grade_map_argument(noise, default=None, help="map qrels grades to the 1-5 rubric of RA-nWG, e.g. 3:5,2:4,1:3,0:1")
    noise.add_argument("--denoise", choices=[m for m in DENOISE_MODES if m != "off"], default="rules",
                       help="the denoised arm (default %(default)s)")
    add_denoise_llm_arguments(noise)
    _add_model_arguments(noise, kinds=False)
    noise.set_defaults(func=run_noise)


# --- names ----------------------------------------------------------------------------------------

def _in_process(args: argparse.Namespace) -> tuple[Embedder | None, Reranker | None]:
    """The probe's model in process: ``(embedder, None)`` for ``--kind embedder``; for ``--kind reranker``
    the reranker and, for ``--retrieval``'s index, the bundled embedder (loaded only then)."""
    if getattr(args, "kind", "embedder") == "reranker":
        reranker = load_reranker_arg(args.model, args.precision)
        return (load_embedder_arg(None, args.precision) if args.retrieval else None), reranker
    return load_embedder_arg(None if args.model == BUNDLED else args.model, args.precision), None


def _similarity(args: argparse.Namespace, embedder: Embedder | None, reranker: Reranker | None) -> Similarity:
    if args.url:
        model = None if args.model == BUNDLED else args.model
        return (remote_rerank if args.kind == "reranker" else remote_embeddings)(args.url, args.api_key, model=model)
    if reranker is not None:

        async def keys(items: list[tuple[str, list[str]]]) -> list[np.ndarray]:
            out = reranker.score([(q, t) for q, texts in items for t in texts]).keys
            bounds = np.cumsum([0] + [len(texts) for _, texts in items])
            return [np.asarray(out[a:b], dtype=np.float32) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

        return keys
    assert embedder is not None, "_in_process gives an embedder when there is no reranker"
    model = embedder

    async def encode(texts: list[str]) -> np.ndarray:  # probe texts are queries: the query prompt
        return model.encode(texts, prompt=model.query_prompt)

    return embedding_similarity(encode)


def run_names(args: argparse.Namespace) -> int:
    templates = load_templates(args.templates)
    ablations = parse_ablations(args.ablations)
    if args.bundles:
        bundles = read_bundles(args.bundles)
    else:
        langs = [lang.strip() for lang in args.lang.split(",") if lang.strip()]
        topics = read_topics(args.topics) if args.topics else None
        bundles = [b for run in range(args.runs) for lang in langs
                   for b in generate(args.queries, lang, args.seed, topics, run=run)]
    if args.write_bundles:
        lines = "".join(json.dumps(b.to_json(), ensure_ascii=False) + "\n" for b in bundles)
        atomic_write_bytes(Path(args.write_bundles), lines.encode("utf-8"))
    ks = parse_ks(args.recall_k)
    if args.retrieval and args.url:
        raise ValueError("--retrieval indexes the bundles with an in-process model: drop --url")
    embedder, reranker = (None, None) if args.url else _in_process(args)
    similarity = _similarity(args, embedder, reranker)
    with tqdm(total=len(bundles) * len(ablations), desc="probing", unit="bundle", file=sys.stderr,
              dynamic_ncols=True, disable=None) as bar:
        rows = asyncio.run(run_probes(bundles, ablations, similarity, templates, seed=args.seed, progress=bar.update))
    summary = summarize(rows, min_base=args.min_base, seed=args.seed)
    payload = {"model": args.model, "url": args.url, "kind": args.kind, "seed": args.seed, "bundles": len(bundles),
               "ablations": list(ablations), "min_base": args.min_base, "summary": summary}
    if args.retrieval:
        assert embedder is not None, "_in_process loads the index's embedder for --retrieval"
        with tqdm(total=len(ablations), desc="indexing and searching", unit="ablation", file=sys.stderr,
                  dynamic_ncols=True, disable=None) as bar:
            payload["retrieval"] = {"mode": args.mode, "k": list(ks), "summary": asyncio.run(probe_retrieval(
                bundles, ablations, templates, rows, embedder, reranker, args.mode, ks, seed=args.seed,
                progress=bar.update))}
    if args.plot_out:
        from steadyrank.serve.tools.probes.plot import plot_delta_delta

        plot_delta_delta(summary, args.plot_out, f"Δname under ablations — {args.model} ({args.kind})")
    if args.json:
        print(dumps_json(payload))
    else:
        print(names_table(summary))
        if args.retrieval:
            print()
            print(retrieval_table(payload["retrieval"]))
    return 0


def _ci(stat: dict) -> str:
    return f"{stat['mean']:+.3f} [{stat['low']:+.3f}, {stat['high']:+.3f}]"


def names_table(summary: list[dict]) -> str:
    """One row per (ablation, language): Δ means with CIs, ΔΔ% and tie counts."""
    headers = ["ablation", "lang", "n", "Δname [95% CI]", "Δtopic", "Δboth", "ΔΔ% name [95% CI]", "excl", "ties n/t/b"]
    rows = []
    for r in summary:
        dd = r.get("delta_delta_pct")
        rows.append([r["ablation"], r["lang"], r["n"], _ci(r["delta_name"]), f"{r['delta_topic']['mean']:+.3f}",
                     f"{r['delta_both']['mean']:+.3f}",
                     f"{dd['mean']:+.1f} [{dd['low']:+.1f}, {dd['high']:+.1f}]" if dd and dd["n"] else "n/a",
                     r.get("excluded", 0), "/".join(str(r["ties"][m]) for m in ("name", "topic", "both"))])
    return format_table(headers, rows)


def retrieval_table(retrieval: dict[str, Any]) -> str:
    """One row per (ablation, language): Δname beside Recall@k of C1, and Recall@k by the sign of Δname."""
    ks = retrieval["k"]
    headers = ["ablation", "lang", "n", "Δname", *[f"R@{k} of C1 [95% CI]" for k in ks],
               f"R@{ks[0]} | Δname>0 (n)", f"R@{ks[0]} | Δname≤0 (n)"]
    rows = []
    for r in retrieval["summary"]:
        split = [f"{m['mean']:.3f} ({m['n']})" if m["mean"] is not None else f"n/a ({m['n']})"
                 for m in (r["by_margin"]["positive"], r["by_margin"]["not_positive"])]
        rows.append([r["ablation"], r["lang"], r["n"], f"{r['delta_name']['mean']:+.3f}",
                     *[f"{r[f'recall@{k}']['mean']:.3f} [{r[f'recall@{k}']['low']:.3f}, {r[f'recall@{k}']['high']:.3f}]"
                       for k in ks], *split])
    return format_table(headers, rows)


# --- noise ----------------------------------------------------------------------------------------

def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--levels: expected integers like 0,2,4, got {text!r}") from None
    bad = [level for level in levels if level not in LEVELS]
    if bad or 0 not in levels:
        raise ValueError(f"--levels must include 0 and be among {LEVELS}, got {text!r}")
    return levels


async def _denoised(texts: dict[str, str], mode: DenoiseMode, rewriter: LlmRewriter | None) -> dict[str, str]:
    from steadyrank.retrieval.rewrite import rewrite_query

    return {qid: (await rewrite_query(text, mode, rewriter)).rewritten for qid, text in texts.items()}


def noise_cosines(clean: dict[str, str], noisy: dict[int, dict[str, str]], denoised: dict[int, dict[str, str]],
                  encode) -> dict[str, Any]:
    """Per level: cosine of each noisy (and denoised) query to its clean form, mean with 95 % CI, and the
    relative drop 1 − mean cosine."""
    ids = list(clean)
    texts = list(dict.fromkeys([clean[q] for q in ids] + [v[q] for arm in (noisy, denoised) for v in arm.values() for q in ids]))
    vectors = np.asarray(encode(texts), dtype=np.float32)
    where = {t: i for i, t in enumerate(texts)}
    base = vectors[[where[clean[q]] for q in ids]]
    out: dict[str, Any] = {}
    for level in noisy:
        row: dict[str, Any] = {}
        for arm, data in (("noisy", noisy), ("denoised", denoised)):
            cos = np.array([cosine_rows(base[i:i + 1], [vectors[[where[data[level][q]]]]])[0][0] for i, q in enumerate(ids)])
            ci = bootstrap_ci(cos)
            row[arm] = {"cosine": {"mean": ci.estimate, "low": ci.low, "high": ci.high, "n": ci.n},
                        "drop_pct": 100.0 * (1.0 - ci.estimate)}
        out[str(level)] = row
    return out


def _retrieval_effect(args: argparse.Namespace, embedder, arms: dict[str, tuple[dict[str, str], DenoiseMode]],
                      rewriter: LlmRewriter | None) -> dict[str, Any]:
    """nDCG@10, RA-nWG@10, Recall@100 (expected over tie orders) per arm through the search pipeline,
    with paired bootstrap CIs of (arm − clean)."""
    from steadyrank.retrieval.shards import open_index
    from steadyrank.retrieval.store import build_index

    qrels = read_qrels(Path(args.beir) / "qrels" / f"{args.split}.tsv")
    settings = RoutingSettings(k_high=args.depth, k_low=min(args.depth, RoutingSettings.k_low))
    with tempfile.TemporaryDirectory(prefix="steadyrank-probe-") as tmp:
        index = args.index
        if index is None:
            index = str(Path(tmp) / "index")
            build_index(index, read_corpus(args.beir, strict=False).documents, embedder)
        with open_index(index, embedder) as store:
            models = local_models(store, embedder, None, rrf_k=60.0, rrf_weights=(1.0, 1.0), rewriter=rewriter)

            async def run_arm(queries: dict[str, str], denoise: DenoiseMode) -> dict[str, dict[str, float]]:
                out = {}
                for qid, text in queries.items():
                    ranked = await search(text, args.mode, models, settings, "fixed50", denoise=denoise)
                    out[qid] = dict(zip(ranked.doc_ids, map(float, ranked.scores), strict=True))
                return out

            runs = {}
            for name, (queries, denoise) in tqdm(arms.items(), desc="searching arms", unit="arm", file=sys.stderr, disable=None):
                runs[name] = asyncio.run(run_arm(queries, denoise))
    evaluations = {name: evaluate(run, qrels, NOISE_MEASURES, rubric_map=args.grade_map) for name, run in runs.items()}
    clean = evaluations["clean"]
    result: dict[str, Any] = {}
    for name, ev in evaluations.items():
        row = {}
        for m in NOISE_MEASURES:
            diff = paired_bootstrap(clean[m].expected, ev[m].expected)
            row[m] = {"mean": float(np.nanmean(ev[m].expected)), "delta_vs_clean": diff.estimate,
                      "delta_low": diff.low, "delta_high": diff.high, "n": diff.n}
        result[name] = row
    return result


def _demo(path: str) -> str:
    """``path``, or the embedded demo folder (BEIR layout) for ``demo``."""
    if path != DEMO:
        return path
    from steadyrank.serve.server.default import DEMO_DIR

    return str(DEMO_DIR)


def run_noise(args: argparse.Namespace) -> int:
    levels = _levels(args.levels)
    args.queries, args.beir = _demo(args.queries), args.beir and _demo(args.beir)
    clean = read_queries(args.queries)
    rewriter = llm_rewriter_arg(args)
    if args.noise == "templates":
        noisy = variants(clean, args.lang, args.seed, levels)
    else:
        if args.lang != "en":
            raise ValueError("--noise dev/heldout: the independent phrasings are English (--lang en)")
        noisy = phrasings.variants(clean, args.noise, args.seed, levels)
        clean = {qid: clean[qid] for qid in noisy[0]}
    denoised = {level: asyncio.run(_denoised(noisy[level], args.denoise, rewriter)) for level in levels}
    if args.url:
        remote = remote_encode(args.url, args.api_key, model=None if args.model == BUNDLED else args.model)
        embedder = None

        def encode(texts: list[str]) -> np.ndarray:
            return asyncio.run(remote(texts))
    else:
        embedder = load_embedder_arg(None if args.model == BUNDLED else args.model, args.precision)
        encode = partial(embedder.encode, prompt=embedder.query_prompt)  # the noisy texts are queries
    payload: dict[str, Any] = {"model": args.model, "lang": args.lang, "noise": args.noise, "seed": args.seed,
                               "queries": len(clean),
                               "levels": list(levels), "denoise": args.denoise,
                               "cosine": noise_cosines(clean, noisy, denoised, encode),
                               "examples": {str(level): next(iter(noisy[level].values())) for level in levels}}
    if args.beir:
        if embedder is None:
            raise ValueError("--beir needs an in-process model (not --url)")
        arms: dict[str, tuple[dict[str, str], DenoiseMode]] = {"clean": (clean, "off"), f"clean+{args.denoise}": (clean, args.denoise)}
        for level in levels:
            if level:
                arms[f"noise{level}"] = (noisy[level], "off")
                arms[f"noise{level}+{args.denoise}"] = (noisy[level], args.denoise)
        payload["retrieval"] = _retrieval_effect(args, embedder, arms, rewriter)
        payload["recovery"] = recovery(payload["retrieval"], levels, args.denoise)
        payload["mode"], payload["depth"] = args.mode, args.depth
    print(dumps_json(payload) if args.json else noise_table(payload))
    return 0


def recovery(retrieval: dict[str, Any], levels: tuple[int, ...], denoise: str) -> dict[str, dict[str, float | None]]:
    """Per noise level and measure, the share of the loss that denoising recovers:
    (Q_denoised − Q_noisy) / (Q_clean − Q_noisy) over the mean values; None where noise cost nothing
    (Q_clean ≤ Q_noisy)."""
    out: dict[str, dict[str, float | None]] = {}
    for level in levels:
        if not level:
            continue
        noisy, denoised = retrieval[f"noise{level}"], retrieval[f"noise{level}+{denoise}"]
        row: dict[str, float | None] = {}
        for m in NOISE_MEASURES:
            lost = retrieval["clean"][m]["mean"] - noisy[m]["mean"]
            row[m] = (denoised[m]["mean"] - noisy[m]["mean"]) / lost if lost > 0 else None
        out[str(level)] = row
    return out


def noise_table(payload: dict[str, Any]) -> str:
    """Cosine per level, then (with --beir) the measures per arm with Δ vs clean."""
    rows = [[level, f"{r['noisy']['cosine']['mean']:.3f}", f"{r['noisy']['drop_pct']:.1f}",
             f"{r['denoised']['cosine']['mean']:.3f}", f"{r['denoised']['drop_pct']:.1f}"]
            for level, r in payload["cosine"].items()]
    out = format_table(["level", "cos(noisy, clean)", "drop %", f"cos({payload['denoise']}, clean)", "drop %"], rows)
    if "retrieval" in payload:
        headers = ["queries"] + [f"{m} (Δ vs clean [95% CI])" for m in NOISE_MEASURES]
        rows = [[arm] + [f"{r[m]['mean']:.4f} ({r[m]['delta_vs_clean']:+.4f} [{r[m]['delta_low']:+.4f}, {r[m]['delta_high']:+.4f}])"
                         for m in NOISE_MEASURES] for arm, r in payload["retrieval"].items()]
        out += "\n\n" + format_table(headers, rows)
        rows = [[f"noise{level}"] + ["n/a" if r[m] is None else f"{100 * r[m]:.0f} %" for m in NOISE_MEASURES]
                for level, r in payload["recovery"].items()]
        out += "\n\n" + format_table([f"loss recovered by {payload['denoise']}", *NOISE_MEASURES], rows)
    return out
