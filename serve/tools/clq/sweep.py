"""Run a grid on a corpus and a golden set: per configuration quality, latency and cost.

What is measured (all on this machine, warm: each index and reranker serves one untimed query first):

- quality: tie-aware expected value and range (max − min over tie orders) of RA-nWG@10/@30,
  nDCG@10 and N-Recall4+@30 over the golden queries, PROC and %PROC of the grid's quality measure.
  Scores come from the :class:`~steadyrank.serve.tools.clq.scores.ScoreCache` (one reranker call per
  pair and regime), run through the production pipeline (``retrieval.pipeline.rerank_candidates``).
- latency: embed, retrieve (FAISS/BM25/fusion) per golden query, timed for every query; rerank timed
  by real reranker calls on the first ``latency.queries`` golden queries (sorted ids), two passes
  for a dynamic policy exactly as served (configurations reranking the identical list of the same
  query with the same regime share one timed call); total = retrieval + hygiene stages (``dedup``,
  ``boost``: the grid's ``hygiene`` axis, timed in the same call; ``hygiene`` in the latency summary)
  + rerank on those queries. ``suppressed``: near-duplicates suppressed per query (mean).
  p50/p95 in ms. The 1/5/15-minute load averages (``os.getloadavg``) when a configuration's rerank
  latencies were taken are stored with it (``load_average``): latencies from a shared machine are
  only comparable at similar load.
- cost: candidates and pair tokens reranked per query, generator prompt tokens (the served top
  ``generator_chunks`` documents), index bytes and build seconds (corpus embedding + index build).

Models: each grid embedder's ``path`` and each reranker regime's ``path``/``precision``/``scoring``
are written over a model section (:class:`Sections`): the served settings' (``clq sweep`` resolves
them as ``steadyrank search`` does), so an unset regime field runs as served.

Each finished configuration is written to ``OUT/configs/<fingerprint>.json`` atomically; a rerun
reuses every file whose fingerprint (configuration, data, latency sample, generator chunks, and the
resolved models where they differ from what a sweep ran before the served sections) matches.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from steadyrank.metrics import evaluate
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseSettings
from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.pipeline import Ranked, latency_summary, rerank_candidates
from steadyrank.retrieval.routing import Route, RoutingDecision, RoutingSettings
from steadyrank.retrieval.store import Candidates, IndexStore
from steadyrank.serve.runtime.resolution import overlay, scoring_json
from steadyrank.serve.runtime.settings import ModelSettings
from steadyrank.serve.server.quality.golden_sets import RELEVANCE_TO_RUBRIC, GoldenSet
from steadyrank.serve.tools.clq.builds import CachedEmbedder, cached_corpus_vectors, index_bytes, open_or_build
from steadyrank.serve.tools.clq.grid import (
    FULL,
    LEGACY_PRECISION,
    LEGACY_SCORING,
    Ann,
    Config,
    Grid,
    KPolicy,
    Model,
    RerankerRegime,
    expand,
)
from steadyrank.serve.tools.clq.scores import ScoreCache

MEASURES = ("ra_nwg@10", "ra_nwg@30", "ndcg@10", "nrecall4@30")
RETRIEVAL_STAGES = ("embed", "dense", "bm25", "fuse")
HYGIENE_STAGES = ("dedup", "boost")


@dataclass(frozen=True)
class Inputs:
    """The data a sweep runs on and its digest (part of every configuration's fingerprint)."""

    documents: list[Document]
    golden: GoldenSet
    digest: str

    @classmethod
    def of(cls, documents: list[Document], golden: GoldenSet) -> Inputs:
        digest = hashlib.sha256()
        for d in documents:
            digest.update(f"{d.id}\0{d.full_text}\0".encode())
        for q in sorted(golden.queries.values(), key=lambda q: q.query_id):
            digest.update(json.dumps([q.query_id, q.query, q.judgments], sort_keys=True).encode())
        return cls(documents, golden, digest.hexdigest()[:16])


def measures_of(grid: Grid) -> list[str]:
    return list(dict.fromkeys([*MEASURES, grid.quality]))


@dataclass(frozen=True)
class Sections:
    """The model sections the grid's models are written over (:func:`serve.runtime.resolution.overlay`).
    The default is what a sweep ran before it read the served settings: the library defaults, the
    reranker in FP32 with HPS. ``calibration``: the served precision calibrations (``auto``)."""

    embedder: ModelSettings = ModelSettings()
    reranker: ModelSettings = ModelSettings(precision=LEGACY_PRECISION, scoring=LEGACY_SCORING)
    calibration: Path | None = None

    def embedder_for(self, model: Model) -> ModelSettings:
        return overlay(self.embedder, path=model.path)

    def reranker_for(self, regime: RerankerRegime) -> ModelSettings:
        return overlay(self.reranker, path=regime.path, precision=regime.precision, scoring=regime.scoring)


LEGACY = Sections()


def served_key(resolved: ModelSettings, legacy: ModelSettings) -> dict[str, Any] | None:
    """What the resume and cache keys add for a resolved model: nothing when it scores as the model a
    sweep ran before the served sections (``legacy``), else its :func:`scoring_json`."""
    mine = scoring_json(resolved)
    return None if mine == scoring_json(legacy) else mine


def fingerprint(config: Config, grid: Grid, inputs: Inputs, served: dict[str, Any] | None = None) -> str:
    """The resume key of ``config``; ``served``: the resolved models where they differ (:func:`served_key`)."""
    parts = [config.fingerprint(), inputs.digest, grid.latency_queries, grid.generator_chunks, measures_of(grid)]
    extra = json.dumps(parts + ([served] if served else []), sort_keys=True)
    return hashlib.sha256(extra.encode()).hexdigest()[:20]


def _routing(policy: KPolicy) -> tuple[RoutingSettings, Route]:
    """Settings and route that make the pipeline rerank exactly the policy's candidates."""
    if policy.routing is not None:
        return policy.routing, "dynamic"
    return RoutingSettings(k_low=policy.depth, k_high=policy.depth), "fixed50"  # depth: the fixed k


def _decision(ranked: Ranked) -> RoutingDecision:
    """The routing decision of a reranked query (``rerank_candidates`` always reranks, so always decides)."""
    assert ranked.decision is not None
    return ranked.decision


def _truncate(candidates: Candidates, depth: int) -> Candidates:
    return replace(candidates, doc_ids=candidates.doc_ids[:depth], scores=candidates.scores[:depth])


class Sweep:
    """One sweep run into ``out``; :meth:`run` returns the per-configuration results (dicts)."""

    def __init__(self, grid: Grid, inputs: Inputs, out: Path, *, cache: Path | None = None,
                 log: Callable[[str], None] | None = None, sections: Sections = LEGACY) -> None:
        self.grid, self.inputs, self.out, self.sections = grid, inputs, out, sections
        self.cache = cache or out / "cache"
        self.configs = expand(grid)
        self.log = log or (lambda message: print(message, file=sys.stderr))
        self.qids = sorted(inputs.golden.queries)
        self.latency_qids = self.qids[: grid.latency_queries]
        self.qrels = {q: inputs.golden.queries[q].relevance for q in self.qids}
        self.reused = 0
        self._rerank_seconds: dict[tuple, tuple[float, float]] = {}

    # -- state -----------------------------------------------------------------------------------

    def models(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The resolved model of every grid embedder and reranker regime, by name (in the report)."""
        return {"embedders": {m.name: scoring_json(self.sections.embedder_for(m)) for m in self.grid.embedders},
                "rerankers": {r.name: scoring_json(self.sections.reranker_for(r)) for r in self.grid.rerankers}}

    def _embedder_key(self, model: Model) -> dict[str, Any] | None:
        return served_key(self.sections.embedder_for(model), LEGACY.embedder_for(model))

    def _reranker_key(self, regime: RerankerRegime) -> dict[str, Any] | None:
        return served_key(self.sections.reranker_for(regime), LEGACY.reranker_for(regime))

    def _state_path(self, config: Config) -> Path:
        keys = {"embedder": self._embedder_key(config.embedder), "reranker": self._reranker_key(config.reranker)}
        served = {k: v for k, v in keys.items() if v is not None}
        return self.out / "configs" / f"{fingerprint(config, self.grid, self.inputs, served)}.json"

    def finished(self) -> dict[str, dict[str, Any]]:
        """Results already on disk for this grid and data, by config id."""
        done = {}
        for config in self.configs:
            path = self._state_path(config)
            if path.exists():
                done[config.config_id] = json.loads(path.read_text(encoding="utf-8"))
        return done

    def _save(self, config: Config, result: dict[str, Any]) -> None:
        path = self._state_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps(result, indent=1).encode())

    # -- run -------------------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        done = self.finished()
        self.reused = len(done)
        todo = [c for c in self.configs if c.config_id not in done]
        self.log(f"{len(self.configs)} configurations: {len(done)} reused, {len(todo)} to run")
        if todo:
            self._run(todo, done)
        return [done[c.config_id] for c in self.configs]

    def _run(self, todo: list[Config], done: dict[str, dict[str, Any]]) -> None:
        from steadyrank.serve.runtime import load_embedder, load_scorer
        from steadyrank.serve.runtime.loading import load_tokenizer

        cache = self.cache
        queries = {q: self.inputs.golden.queries[q].query for q in self.qids}
        for embedder_model in dict.fromkeys(c.embedder for c in todo):
            embedder = load_embedder(self.sections.embedder_for(embedder_model))
            variant = _key_text(self._embedder_key(embedder_model))
            vectors, embed_seconds = cached_corpus_vectors(self.inputs.documents, embedder, cache, variant)
            cached = CachedEmbedder(embedder, [d.full_text for d in self.inputs.documents], vectors)
            mine = [c for c in todo if c.embedder == embedder_model]
            candidates, stores = self._retrieve(embedder_model, mine, cached, queries)
            for regime in dict.fromkeys(c.reranker for c in mine):
                scorer = load_scorer(self.sections.reranker_for(regime), self.sections.calibration)
                scores = ScoreCache(scorer, load_tokenizer(scorer.spec.path),
                                    cache / f"scores-{_regime_key(regime, self._reranker_key(regime))}.json")
                self._fill(scores, [c for c in mine if c.reranker == regime], candidates, stores, queries)
                scorer.rerank(queries[self.qids[0]], ["warm-up"])  # untimed: first call allocates
                for config in tqdm([c for c in mine if c.reranker == regime], desc=f"configurations ({regime.name})",
                                   unit="config", file=sys.stderr):
                    result = self._evaluate(config, candidates, stores, queries, scores, scorer, embed_seconds)
                    self._save(config, result)
                    done[config.config_id] = result
            for store in {id(s): s for s, _ in stores.values()}.values():
                store.close()

    def _retrieve(self, embedder_model: Model, configs: list[Config], embedder: CachedEmbedder,
                  queries: dict[str, str]) -> tuple[dict[tuple, dict[str, Candidates]], dict[tuple, tuple[IndexStore, dict]]]:
        """Candidates per retrieval key (dimension, ann, stage) and query, to the deepest policy's depth."""
        depth = max(p.depth for p in self.grid.k_policies)
        stores: dict[tuple, tuple[IndexStore, dict]] = {}
        builds: dict[tuple, tuple[IndexStore, dict]] = {}
        out: dict[tuple, dict[str, Candidates]] = {}
        keys: dict[tuple[str, Ann | None, Mode], None] = dict.fromkeys((c.dimension, c.ann, c.first_stage) for c in configs)
        for key in keys:
            dimension, ann, stage = key
            if ann is None:  # bm25: every index directory carries the same BM25 index; use the first
                dimension, ann = self.grid.dimensions[0], self.grid.ann[0]
            build_key = (dimension, ann)
            if build_key not in builds:
                factory = ann.factory if dimension == FULL else f"{dimension},{ann.factory}"
                variant = self._embedder_key(embedder_model)
                name = hashlib.sha256(json.dumps([embedder_model.path, factory, ann.ef_search, ann.nprobe]
                                                 + ([variant] if variant else []), sort_keys=True).encode())
                path = self.out / "indexes" / f"{embedder_model.name}-{dimension}-{ann.name}-{name.hexdigest()[:10]}"
                self.log(f"index {path.name}: {factory}")
                store = open_or_build(path, self.inputs.documents, embedder,
                                      DenseSettings(factory, ef_search=ann.ef_search, nprobe=ann.nprobe))
                builds[build_key] = (store, store.info())
            stores[key] = builds[build_key]
            store = builds[build_key][0]
            store.search(queries[self.qids[0]], mode=stage, depth=depth)  # untimed warm-up
            out[key] = {q: store.search(text, mode=stage, depth=depth) for q, text in
                        tqdm(queries.items(), desc=f"retrieve {stage} {dimension} {getattr(ann, 'name', '-')}",
                             unit="query", file=sys.stderr)}
        return out, stores

    def _fill(self, scores: ScoreCache, configs: list[Config], candidates: dict, stores: dict,
              queries: dict[str, str]) -> None:
        """Score the union of every configuration's candidates per query (only uncached pairs)."""
        for qid in tqdm(self.qids, desc=f"rerank cache ({configs[0].reranker.name})", unit="query", file=sys.stderr):
            docs: dict[str, None] = {}
            for config in configs:
                key = (config.dimension, config.ann, config.first_stage)
                for doc_id in candidates[key][qid].doc_ids[: config.k_policy.depth]:
                    docs[doc_id] = None
            store = stores[(configs[0].dimension, configs[0].ann, configs[0].first_stage)][0]
            scores.fill(queries[qid], [store.document(d).full_text for d in docs])

    def _evaluate(self, config: Config, candidates: dict, stores: dict, queries: dict[str, str],
                  scores: ScoreCache, scorer: Any, embed_seconds: float) -> dict[str, Any]:
        key = (config.dimension, config.ann, config.first_stage)
        store, info = stores[key]
        settings, route = _routing(config.k_policy)
        rankings: dict[str, Ranked] = {}
        reranked, pair_tokens, generator_tokens = [], [], []
        for qid in self.qids:
            found = _truncate(candidates[key][qid], config.k_policy.depth)
            ranked = rerank_candidates(store, queries[qid], found, scores, settings, route,  # type: ignore[arg-type]
                                       config.stages)
            rankings[qid] = ranked
            k = _decision(ranked).k_rerank
            texts = [store.document(d).full_text for d in ranked.candidates.doc_ids[:k]]
            reranked.append(k)
            pair_tokens.append(scores.pair_tokens(queries[qid], texts))
            top = [store.document(d).full_text for d in ranked.doc_ids[: self.grid.generator_chunks]]
            generator_tokens.append(scores.doc_tokens(top))
        run = {q: dict(zip(r.doc_ids, map(float, r.scores), strict=True)) for q, r in rankings.items()}
        evaluation = evaluate(run, self.qrels, measures_of(self.grid), rubric_map=RELEVANCE_TO_RUBRIC)
        summary = evaluation.summary
        per_query = np.nan_to_num(evaluation[self.grid.quality].expected, nan=0.0)
        timed = []
        load_average = os.getloadavg()
        for qid in self.latency_qids:
            found = _truncate(candidates[key][qid], config.k_policy.depth)
            reranked_ids = rankings[qid].candidates.doc_ids[: _decision(rankings[qid]).k_rerank]
            passes = (config.reranker, qid, tuple(reranked_ids), settings.k_low, config.stages)
            if passes not in self._rerank_seconds:  # an identical workload was timed already: reuse it
                live = rerank_candidates(store, queries[qid], found, scorer, settings, route,  # type: ignore[arg-type]
                                         config.stages)
                # both passes (and boundary re-scoring), then the hygiene stages that ran
                self._rerank_seconds[passes] = (live.timings["rerank"],
                                                sum(live.timings.get(s, 0.0) for s in HYGIENE_STAGES))
            retrieval = sum(found.timings.get(s, 0.0) for s in RETRIEVAL_STAGES)
            rerank, hygiene = self._rerank_seconds[passes]
            entry = {"rerank": rerank, "total": retrieval + hygiene + rerank}
            if config.hygiene is not None:
                entry["hygiene"] = hygiene
            timed.append(entry)
        stage_times = [{s: r.candidates.timings[s] for s in RETRIEVAL_STAGES if s in r.candidates.timings}
                       | {"retrieve": sum(r.candidates.timings.get(s, 0.0) for s in RETRIEVAL_STAGES if s != "embed")}
                       for r in rankings.values()]
        manifest = {k: info[k] for k in ("files", "build_seconds")}
        return {
            "config_id": config.config_id,
            "embedder": config.embedder.name, "dimension": config.dimension,
            "ann": None if config.ann is None else config.ann.name, "factory": config.factory,
            "first_stage": config.first_stage, "k_policy": config.k_policy.name, "reranker": config.reranker.name,
            **({} if config.hygiene is None else {"hygiene": config.hygiene.name, **config.stages.to_json(),
                                                  "suppressed": float(np.mean([len(r.demoted) for r in rankings.values()]))}),
            "quality": {m: {"expected": summary[m]["expected"], "range": summary[m]["range"]} for m in measures_of(self.grid)}
                       | {"proc": summary[self.grid.quality]["proc"], "proc_ratio": summary[self.grid.quality]["proc_ratio"]},
            "per_query": dict(zip(evaluation.query_ids, per_query.tolist(), strict=True)),
            "latency": latency_summary(stage_times) | latency_summary(timed),
            "latency_queries": len(timed),
            "load_average": list(load_average),
            "cost": {
                "candidates_reranked": float(np.mean(reranked)),
                "escalation_rate": float(np.mean([_decision(r).escalated for r in rankings.values()])),
                "pair_tokens_reranked": float(np.mean(pair_tokens)),
                "generator_prompt_tokens": float(np.mean(generator_tokens)),
                "index_bytes": index_bytes(manifest, config.first_stage),
                "build_seconds": embed_seconds * (config.first_stage != "bm25") + float(manifest["build_seconds"]),
            },
        }


def _regime_key(regime: RerankerRegime, served: dict[str, Any] | None) -> str:
    """The score cache's name: the regime as written (unset fields as before: fp32, hps), and the
    resolved model where it differs from that (:func:`served_key`)."""
    legacy = regime.legacy_json()
    written = [legacy["path"], legacy["precision"], legacy["scoring"]]
    return hashlib.sha256(json.dumps(written + ([served] if served else []), sort_keys=True).encode()).hexdigest()[:12]


def _key_text(served: dict[str, Any] | None) -> str:
    return "" if served is None else json.dumps(served, sort_keys=True)
