"""From Δ-margins to retrieval: the probe bundles indexed and searched through the real pipeline.

Per ablation, every bundle's five candidates rendered under that ablation form one corpus (document
id ``<bundle id>/<slot>``, so the other bundles' passages are the distractors), indexed by
:func:`~steadyrank.retrieval.build.build_index` (FAISS and BM25) and searched with each bundle's
query through :func:`~steadyrank.retrieval.pipeline.search` — the path of ``steadyrank search`` and
the server — to ``depth`` = the largest k. The right passage is C1 (right author, right topic).

Recall@k of C1 per bundle is tie-aware (:func:`~steadyrank.metrics.evaluate`, qrels ``{C1: 1}``):
the expected value over the orders of tied scores, so under ``mask``, where C1 and both impostors
are the same text, C1 is first with probability 1/3 at most. Each (ablation, language) row puts the
mean Recall@k (95 % bootstrap CI) beside the mean Δname of the same bundles, and splits the smallest
k's recall by the sign of Δname: a positive margin is what lets C1 beat its impostors, but the
index also holds every other bundle's passages.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from steadyrank.metrics.aggregate import bootstrap_ci
from steadyrank.metrics.evaluate import evaluate
from steadyrank.retrieval.build import build_index
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.index import open_index
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.pipeline import local_models, search
from steadyrank.retrieval.protocols import Embedder, Reranker
from steadyrank.retrieval.routing import RoutingSettings
from steadyrank.serve.tools.probes.ablations import ablate
from steadyrank.serve.tools.probes.bundles import SLOTS, Bundle
from steadyrank.serve.tools.probes.margins import ProbeRow

RIGHT = "C1"


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,10"`` → ``(1, 10)``: distinct positive cutoffs, sorted."""
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--recall-k: expected integers like 1,10, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--recall-k: cutoffs must be ≥ 1, got {text!r}")
    return tuple(ks)


def bundle_corpus(bundles: Sequence[Bundle], ablation: str, templates: dict[str, dict[str, str]],
                  seed: int) -> tuple[list[Document], dict[str, str]]:
    """The documents (``<bundle>/<slot>``) and the queries (by bundle id) of one ablation."""
    ids = [b.id for b in bundles]
    if len(set(ids)) != len(ids):
        raise ValueError("--retrieval needs distinct bundle ids (a bundle's passages are named after it)")
    documents, queries = [], {}
    for b in bundles:
        rendered = ablate(b, ablation, templates, seed)
        queries[b.id] = rendered.query
        documents += [Document(f"{b.id}/{slot}", text) for slot, text in zip(SLOTS, rendered.candidates, strict=True)]
    return documents, queries


async def recall_of_right_passage(documents: list[Document], queries: dict[str, str], embedder: Embedder,
                                  reranker: Reranker | None, mode: Mode, ks: Sequence[int],
                                  workdir: Path) -> dict[str, dict[str, float]]:
    """Per bundle, the expected Recall@k of its C1 for every k: index ``documents`` in ``workdir``,
    search every query through the pipeline (``reranker``, when given, reranks all retrieved)."""
    depth = max(ks)
    build_index(workdir, documents, embedder)
    with open_index(workdir, embedder) as store:
        models = local_models(store, embedder, reranker, rrf_k=60.0, rrf_weights=(1.0, 1.0))
        settings = RoutingSettings(k_low=depth, k_high=depth)
        run = {}
        for qid, text in queries.items():
            ranked = await search(text, mode, models, settings, "fixed50")
            run[qid] = dict(zip(ranked.doc_ids, map(float, ranked.scores), strict=True))
    qrels = {qid: {f"{qid}/{RIGHT}": 1.0} for qid in queries}
    measures = [f"recall@{k}" for k in ks]
    ev = evaluate(run, qrels, measures)
    return {qid: {m: float(ev[m].expected[i]) for m in measures} for i, qid in enumerate(ev.query_ids)}


def summarize_retrieval(rows: Sequence[ProbeRow], recalls: dict[tuple[str, str], dict[str, float]],
                        ks: Sequence[int], *, seed: int = 0) -> list[dict]:
    """One record per (ablation, language): mean Δname, Recall@k (95 % bootstrap CIs), and the
    smallest k's Recall split by the sign of Δname. ``recalls`` is keyed by (ablation, bundle)."""
    groups: dict[tuple[str, str], list[ProbeRow]] = {}
    for r in rows:
        groups.setdefault((r.ablation, r.lang), []).append(r)
    first = f"recall@{min(ks)}"
    out = []
    for (ablation, lang), members in groups.items():
        names = np.array([r.margins.name for r in members])
        record: dict = {"ablation": ablation, "lang": lang, "n": len(members),
                        "delta_name": _ci(names, seed)}
        for k in ks:
            record[f"recall@{k}"] = _ci(np.array([recalls[(ablation, r.bundle)][f"recall@{k}"] for r in members]), seed)
        recall = np.array([recalls[(ablation, r.bundle)][first] for r in members])
        record["by_margin"] = {
            "measure": first,
            "positive": _mean(recall[names > 0]),
            "not_positive": _mean(recall[names <= 0]),
        }
        out.append(record)
    return out


def _ci(values: np.ndarray, seed: int) -> dict[str, float | int]:
    ci = bootstrap_ci(values, seed=seed)
    return {"mean": ci.estimate, "low": ci.low, "high": ci.high, "n": ci.n}


def _mean(values: np.ndarray) -> dict[str, float | int | None]:
    return {"mean": float(values.mean()) if values.size else None, "n": int(values.size)}


async def probe_retrieval(bundles: Sequence[Bundle], ablations: Sequence[str], templates: dict[str, dict[str, str]],
                          rows: Sequence[ProbeRow], embedder: Embedder, reranker: Reranker | None, mode: Mode,
                          ks: Sequence[int], *, seed: int = 0,
                          progress: Callable[[int], object] | None = None) -> list[dict]:
    """Every ablation indexed and searched (module docstring); the summary of :func:`summarize_retrieval`."""
    recalls: dict[tuple[str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="steadyrank-probe-names-") as tmp:
        for ablation in ablations:
            documents, queries = bundle_corpus(bundles, ablation, templates, seed)
            found = await recall_of_right_passage(documents, queries, embedder, reranker, mode, ks,
                                                  Path(tmp) / ablation)
            recalls |= {(ablation, qid): r for qid, r in found.items()}
            if progress is not None:
                progress(1)
    return summarize_retrieval(rows, recalls, ks, seed=seed)
