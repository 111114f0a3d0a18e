"""Near-duplicate suppression and the lexical boost (retrieval.hygiene) on a BEIR set, as served.

Run: ``python benchmarks/bench_dedup_boost.py --beir BEIR_FOLDER [--copies 500] [--json]``
(the TREC-DL 2019 subset in BEIR layout was used for benchmarks/results/dedup_boost.json).

The pipeline is the served default's (:func:`retrieval.pipeline.search`: bundled all-MiniLM-L6-v2
embedder, the reranker being the embedder, so candidates are scored from the index's stored FP32
vectors; routing defaults k_low 50, k_high 100, top_n 10, route dynamic; Flat FAISS index + BM25),
in the dense and hybrid first stages, on two corpora:

- ``original``: the BEIR corpus as given;
- ``injected``: the corpus plus ``--copies`` near-duplicates: copies of randomly chosen passages
  (seed ``--seed``) with one or two small word edits each (a word deleted, two neighbours swapped, a
  word repeated, the first word's case changed). A copy shares its source's judgment, but a source
  counts once: in each served list the second and later occurrences of the same source (a copy
  after its source, or the source after its copy) are scored as unjudged (non-relevant) passages,
  so a list that repeats a passage pays for the slot.

Quality: RA-nWG@30 (rubric 3→5, 2→4, 1→3, unjudged→1, via ``--grade-map``) and nDCG@10,
tie-aware expected values (``metrics.evaluate``). Never graded on what was tuned: the judged
queries are split by sorted id into a development half (even positions) and a held-out half (odd);
the dedup threshold is picked on the development half of the injected corpus and the boost weight
on the development half of the original corpus (max RA-nWG@30; ties to the least aggressive
setting), per first stage; the report's numbers are the held-out half's, each stage against off
with a paired bootstrap CI of the per-query difference. Costs as counts: candidates suppressed per
query; stage times (ms, with the load average: the box is shared) are secondary.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402

from steadyrank.metrics import evaluate  # noqa: E402
from steadyrank.metrics.aggregate import paired_bootstrap  # noqa: E402
from steadyrank.retrieval.candidate_pool import CandidatePool  # noqa: E402
from steadyrank.retrieval.corpus import Document, read_documents  # noqa: E402
from steadyrank.retrieval.dense import DenseSettings  # noqa: E402
from steadyrank.retrieval.hygiene import Hygiene  # noqa: E402
from steadyrank.retrieval.modes import Mode  # noqa: E402
from steadyrank.retrieval.pipeline import PassScores, Ranked, SearchModels, search  # noqa: E402
from steadyrank.retrieval.routing import RoutingSettings  # noqa: E402
from steadyrank.retrieval.store import IndexStore, build_index  # noqa: E402
from steadyrank.serve.cli.options import parse_grade_map  # noqa: E402
from steadyrank.serve.server.quality.golden_sets import RELEVANCE_TO_RUBRIC, load_golden  # noqa: E402
from steadyrank.serve.tools.clq.builds import CachedEmbedder, cached_corpus_vectors  # noqa: E402

MEASURES = ("ra_nwg@30", "ndcg@10")
MODES: tuple[Mode, ...] = ("dense", "hybrid")
THRESHOLDS = (0.98, 0.95, 0.9, 0.85)  # least aggressive first (ties go to it)
WEIGHTS = (0.02, 0.05, 0.1, 0.2, 0.4)  # rank-key units: the keys are cosines here


def near_copy(doc: Document, rng: np.random.Generator) -> Document:
    """``doc`` with one or two small word edits (module docstring), id ``<id>~copy``."""
    words = doc.text.split()
    for _ in range(int(rng.integers(1, 3))):
        if len(words) < 3:
            break
        i = int(rng.integers(0, len(words) - 1))
        edit = int(rng.integers(0, 4))
        if edit == 0:
            del words[i]
        elif edit == 1:
            words[i], words[i + 1] = words[i + 1], words[i]
        elif edit == 2:
            words.insert(i, words[i])
        else:
            words[0] = words[0].lower() if words[0][:1].isupper() else words[0].capitalize()
    return Document(f"{doc.id}~copy", " ".join(words), doc.title)


def served_list(ranked: Ranked, source_of: dict[str, str]) -> dict[str, float]:
    """The run entry of one query: each source's first occurrence under the source's id, later
    occurrences under a fresh unjudged id (module docstring)."""
    seen: set[str] = set()
    out: dict[str, float] = {}
    for doc_id, score in zip(ranked.doc_ids, ranked.scores.tolist(), strict=True):
        source = source_of.get(doc_id, doc_id)
        out[source if source not in seen else f"repeat:{doc_id}"] = score
        seen.add(source)
    return out


class Searches:
    """The served pipeline over one index, retrieval and query embedding computed once per query and mode."""

    def __init__(self, store: IndexStore, embedder: Any) -> None:
        self.store, self.embedder = store, embedder
        self.pools: dict[tuple[str, Mode], CandidatePool] = {}
        self.vectors: dict[str, np.ndarray] = {}

    async def _embed(self, query: str) -> np.ndarray:
        if query not in self.vectors:
            self.vectors[query] = self.embedder.encode([query], prompt=self.embedder.query_prompt)[0]
        return self.vectors[query]

    async def _retrieve(self, query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                        with_vectors: bool) -> CandidatePool:
        key = (query, mode)
        if key not in self.pools:
            found = self.store.search(query, mode=mode, depth=depth, vector=vector)
            self.pools[key] = CandidatePool.from_store(self.store, found, with_vectors=True)
        return self.pools[key]

    @staticmethod
    async def _never(query: str, texts: list[str]) -> PassScores:
        raise AssertionError("the reranker is the embedder: candidates are scored from the stored vectors")

    def run(self, queries: dict[str, str], mode: Mode, hygiene: Hygiene) -> dict[str, Ranked]:
        models = SearchModels(retrieve=self._retrieve, embed=self._embed, score=self._never, stored_vectors=True)

        async def all_queries() -> dict[str, Ranked]:
            return {q: await search(text, mode, models, RoutingSettings(), "dynamic", "off", hygiene)
                    for q, text in queries.items()}

        return asyncio.run(all_queries())


def quality(rankings: dict[str, Ranked], qrels: dict[str, dict[str, int]], source_of: dict[str, str],
            qids: Iterable[str]) -> dict[str, np.ndarray]:
    """Per-query expected values of each measure over ``qids`` (sorted), NaN as 0."""
    qids = sorted(qids)
    run = {q: served_list(rankings[q], source_of) for q in qids}
    evaluation = evaluate(run, {q: qrels[q] for q in qids}, list(MEASURES), rubric_map=RELEVANCE_TO_RUBRIC)
    assert evaluation.query_ids == qids
    return {m: np.nan_to_num(evaluation[m].expected, nan=0.0) for m in MEASURES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    parser.add_argument("--copies", type=int, default=500, help="near-duplicates injected (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grade-map", type=parse_grade_map, default=parse_grade_map("3:5,2:4,1:3,0:1"),
                        help="qrels grade → 1–5 rubric (default 3:5,2:4,1:3,0:1)")
    parser.add_argument("--cache", default="runs/bench-dedup-boost-cache", help="corpus embedding cache folder")
    parser.add_argument("--json", action="store_true", help="table to stderr, JSON only on stdout")
    args = parser.parse_args()

    from steadyrank.serve.runtime import ModelSettings, load_embedder

    beir = Path(args.beir)
    documents = read_documents(beir / "corpus.jsonl")
    golden = load_golden(beir, grade_map=args.grade_map)
    qids = sorted(golden.queries)
    queries = {q: golden.queries[q].query for q in qids}
    qrels = {q: golden.queries[q].relevance for q in qids}
    halves = {"development": qids[0::2], "held_out": qids[1::2]}
    rng = np.random.default_rng(args.seed)
    chosen = sorted(rng.choice(len(documents), size=args.copies, replace=False).tolist())
    copies = [near_copy(documents[i], rng) for i in chosen]
    source_of = {c.id: documents[i].id for c, i in zip(copies, chosen, strict=True)}
    corpora = {"original": documents, "injected": documents + copies}

    embedder = load_embedder(ModelSettings())
    original_vectors, _ = cached_corpus_vectors(documents, embedder, Path(args.cache))
    copy_vectors, _ = cached_corpus_vectors(copies, embedder, Path(args.cache))
    vectors = np.concatenate([original_vectors, copy_vectors])
    cached = CachedEmbedder(embedder, [d.full_text for d in corpora["injected"]], vectors)
    copy_cosines = np.einsum("ij,ij->i", vectors[chosen], vectors[len(documents):]).astype(np.float64)

    settings = [("off", Hygiene())] + [(f"dedup {t:g}", Hygiene(dedup_threshold=t)) for t in THRESHOLDS] \
        + [(f"boost {w:g}", Hygiene(boost_weight=w)) for w in WEIGHTS]
    per_query: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}
    suppressed: dict[tuple[str, str, str], float] = {}
    stage_ms: dict[tuple[str, str, str], dict[str, float]] = {}
    load_average = os.getloadavg()

    def measure(searches: Searches, corpus_name: str, mode: Mode, name: str, hygiene: Hygiene) -> None:
        key = (corpus_name, mode, name)
        started = time.perf_counter()
        rankings = searches.run(queries, mode, hygiene)
        print(f"{' '.join(key)}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        per_query[key] = {f"{h}:{m}": v for h in halves for m, v in quality(rankings, qrels, source_of, halves[h]).items()}
        suppressed[key] = float(np.mean([len(r.demoted) for r in rankings.values()]))
        stage_ms[key] = {s: 1000 * float(np.mean([r.timings[s] for r in rankings.values()]))
                         for s in ("dedup", "boost") if s in next(iter(rankings.values())).timings}

    def mean(key: tuple[str, str, str], half: str, measure: str) -> float:
        return float(per_query[key][f"{half}:{measure}"].mean())

    with tempfile.TemporaryDirectory(prefix="bench-dedup-boost-") as tmp, ExitStack() as stack:
        searches: dict[str, Searches] = {}
        for corpus_name, docs in corpora.items():
            build_index(Path(tmp) / corpus_name, docs, cached, dense=DenseSettings("Flat"))
            searches[corpus_name] = Searches(stack.enter_context(IndexStore.open(Path(tmp) / corpus_name, cached)),
                                             embedder)
            for mode in MODES:
                for name, hygiene in settings:
                    measure(searches[corpus_name], corpus_name, mode, name, hygiene)
        picks: dict[str, dict[str, Any]] = {}
        for mode in MODES:
            dedup = max((s for s in settings if s[0].startswith("dedup")),  # max keeps the first of equals
                        key=lambda s: mean(("injected", mode, s[0]), "development", "ra_nwg@30"))
            boost = max((s for s in settings if s[0].startswith("boost")),
                        key=lambda s: mean(("original", mode, s[0]), "development", "ra_nwg@30"))
            picks[mode] = {"dedup_threshold": dedup[1].dedup_threshold, "boost_weight": boost[1].boost_weight,
                           "dedup": dedup[0], "boost": boost[0]}
            for corpus_name in corpora:  # the picked stages together
                measure(searches[corpus_name], corpus_name, mode, "both",
                        Hygiene(dedup[1].dedup_threshold, boost[1].boost_weight))

    rows, results = [], []
    for corpus_name in corpora:
        for mode in MODES:
            variants = [("off", "off"), ("dedup", picks[mode]["dedup"]), ("boost", picks[mode]["boost"]),
                        ("both", "both")]
            for label, name in variants:
                key = (corpus_name, mode, name)
                entry: dict[str, Any] = {"corpus": corpus_name, "mode": mode, "stage": label, "setting": name,
                                         "suppressed_per_query": suppressed[key], "stage_ms": stage_ms[key]}
                for half in halves:
                    entry[half] = {m: mean(key, half, m) for m in MEASURES}
                for m in MEASURES:
                    ci = paired_bootstrap(per_query[(corpus_name, mode, "off")][f"held_out:{m}"],
                                          per_query[key][f"held_out:{m}"])
                    entry[f"held_out_vs_off:{m}"] = {"diff": ci.estimate, "ci_low": ci.low, "ci_high": ci.high}
                results.append(entry)
                rows.append([corpus_name, mode, label, name if label != "both" else
                             f"dedup {picks[mode]['dedup_threshold']:g} + boost {picks[mode]['boost_weight']:g}",
                             f"{entry['held_out']['ra_nwg@30']:.4f}",
                             _ci(entry["held_out_vs_off:ra_nwg@30"]), f"{entry['held_out']['ndcg@10']:.4f}",
                             _ci(entry["held_out_vs_off:ndcg@10"]), f"{suppressed[key]:.1f}"])
    grid = [{"corpus": c, "mode": m, "setting": s,
             **{h: {x: mean((c, m, s), h, x) for x in MEASURES} for h in halves},
             "suppressed_per_query": suppressed[(c, m, s)]}
            for (c, m, s) in per_query if s != "both"]
    payload = {
        "beir": beir.name, "documents": len(documents), "copies": args.copies, "seed": args.seed,
        "queries": {h: len(v) for h, v in halves.items()},
        "pipeline": "served default: bundled all-MiniLM-L6-v2 embedder = reranker (stored-vector scores), Flat + "
                    "BM25, routing defaults (k_low 50, k_high 100, top_n 10, dynamic)",
        "copy_cosine": {"min": float(copy_cosines.min()), "median": float(np.median(copy_cosines)),
                        "p10": float(np.quantile(copy_cosines, 0.1))},
        "picks": picks, "results": results, "grid": grid, "load_average_at_start": list(load_average),
    }
    emit(payload, ["corpus", "mode", "stage", "setting", "RA-nWG@30", "Δ vs off [95% CI]", "nDCG@10",
                   "Δ vs off [95% CI]", "suppressed/q"], rows, json_only=args.json)


def _ci(ci: dict[str, float]) -> str:
    return f"{ci['diff']:+.4f} [{ci['ci_low']:+.4f}, {ci['ci_high']:+.4f}]"


if __name__ == "__main__":
    main()
