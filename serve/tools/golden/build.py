"""The golden-set build: pool → grade → prune → refine, checkpointed after every judge call.

Stages run over all queries in file order, each with a progress bar: pooling, grading (one or more
judge calls per query), then pruning and listwise refinement per query. A query's state
(:mod:`.checkpoint`) records what is done, so a restarted build skips it; with a deterministic
judge the outputs equal an uninterrupted build's byte for byte. Outputs (:func:`write_outputs`):
``golden.jsonl`` (the server's golden format plus ``ranking``, the refined order), ``audit/<query>.json``
and ``summary.json``. One build at a time writes a folder (:func:`lock_out_dir`).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from tqdm import tqdm

from steadyrank.retrieval.fsio import WriterLock, atomic_write_bytes, fsync_dir, make_dirs
from steadyrank.retrieval.fusion import DEFAULT_RRF_K
from steadyrank.retrieval.store import IndexStore
from steadyrank.serve.output import json_safe
from steadyrank.serve.tools.golden.checkpoint import BUILD_FILE, LOCK_FILE, STATE_DIR, Checkpoint, write_json
from steadyrank.serve.tools.golden.judges import Judge, Passage
from steadyrank.serve.tools.golden.pool import RETRIEVERS, Retriever, pool_query
from steadyrank.serve.tools.golden.prune import PruneSettings, prune
from steadyrank.serve.tools.golden.refine import RefineSettings, RefineState, run_refinement
from steadyrank.serve.tools.golden.summary import query_record, summarise

GOLDEN_FILE = "golden.jsonl"
SUMMARY_FILE = "summary.json"
AUDIT_DIR = "audit"


class BuildSettings(BaseModel):
    """Pool, prune and refinement settings of a build (all part of its fingerprint)."""

    model_config = ConfigDict(extra="forbid")

    retrievers: list[Retriever] = Field(list(RETRIEVERS), min_length=1)
    depth: int = Field(30, ge=1, description="candidates per retriever list")
    rrf_k: float = Field(DEFAULT_RRF_K, ge=0)
    prune: PruneSettings = Field(default_factory=PruneSettings)
    refine: RefineSettings = Field(default_factory=RefineSettings)


def _bar(total: int, desc: str, unit: str, initial: int = 0) -> tqdm:
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)


class GoldenBuild:
    """One build over ``queries`` (``{query_id: text}``) into ``out_dir``."""

    def __init__(self, stores: Sequence[tuple[str, IndexStore]], queries: dict[str, str], judge: Judge,
                 settings: BuildSettings, out_dir: Path) -> None:
        self.stores, self.queries, self.judge, self.settings = stores, queries, judge, settings
        self.out_dir = out_dir
        self.checkpoint = Checkpoint(out_dir)

    def _text(self, doc_id: str) -> str:
        for _, store in self.stores:
            try:
                return store.document(doc_id).full_text
            except KeyError:
                continue
        raise KeyError(doc_id)

    def _passages(self, doc_ids: Sequence[str]) -> list[Passage]:
        return [(d, self._text(d)) for d in doc_ids]

    def _states(self) -> list[dict[str, Any]]:
        states = []
        for position, (qid, text) in enumerate(self.queries.items(), start=1):
            states.append(self.checkpoint.load(position) or {"query_id": qid, "query": text, "pool": None,
                                                              "grade_calls": [], "grades": {}, "kept": None,
                                                              "refine": None, "rank_calls": []})
        return states

    def run(self, fingerprint: dict[str, Any], *, overwrite: bool = False) -> dict[str, Any]:
        """Run (or resume) every stage and write the outputs; returns the summary."""
        self.checkpoint.open(fingerprint, overwrite=overwrite)
        states = self._states()
        s = self.settings
        with _bar(len(states), "pooling", "query", sum(st["pool"] is not None for st in states)) as bar:
            for position, st in enumerate(states, start=1):
                if st["pool"] is None:
                    entries = pool_query(self.stores, st["query"], s.retrievers, depth=s.depth, rrf_k=s.rrf_k)
                    st["pool"] = [{"doc_id": e.doc_id, "provenance": e.provenance} for e in entries]
                    self.checkpoint.save(position, st)
                    bar.update()
        total = sum(len(st["pool"]) for st in states)
        with _bar(total, "grading", "doc", sum(len(st["grades"]) for st in states)) as bar:
            for position, st in enumerate(states, start=1):
                todo = [p["doc_id"] for p in st["pool"] if p["doc_id"] not in st["grades"]]
                if not todo:
                    continue
                for call in self.judge.grade(st["query"], self._passages(todo)):
                    st["grade_calls"].append(call.to_json())
                    st["grades"].update(call.answer["grades"])
                    self.checkpoint.save(position, st)
                    bar.update(len(call.answer["grades"]))
        with _bar(len(states), "refining", "query", sum(bool(st["refine"] and st["refine"]["done"]) for st in states)) as bar:
            for position, st in enumerate(states, start=1):
                if st["kept"] is None:
                    st["kept"] = prune([p["doc_id"] for p in st["pool"]], st["grades"], s.prune)
                    st["refine"] = RefineState.start([st["grades"][d] for d in st["kept"]], s.refine).to_json()
                    self.checkpoint.save(position, st)
                    if st["refine"]["done"]:
                        bar.update()
                index = {doc: i for i, doc in enumerate(st["kept"])}

                def rank_batch(batch: list[int], st: dict[str, Any] = st, index: dict[str, int] = index) -> list[int]:
                    call = self.judge.rank(st["query"], self._passages([st["kept"][i] for i in batch]))
                    st["rank_calls"].append(call.to_json())
                    return [index[d] for d in call.answer["ranking"]]

                def on_round(state: RefineState, st: dict[str, Any] = st, position: int = position) -> None:
                    st["refine"] = state.to_json()
                    self.checkpoint.save(position, st)
                    if state.done:
                        bar.update()

                run_refinement(RefineState.from_json(st["refine"]), s.refine, st["query_id"], rank_batch, on_round)
        return write_outputs(self.out_dir, states)


def _audit_names(query_ids: Sequence[str]) -> list[str]:
    """``<query_id>.json`` with unsafe characters as ``_``; a clash gets ``-<position>``."""
    names, seen = [], set()
    for position, qid in enumerate(query_ids, start=1):
        name = re.sub(r"[^\w.-]", "_", qid)
        name = f"{name}-{position}" if name in seen else name
        seen.add(name)
        names.append(f"{name}.json")
    return names


def write_outputs(out_dir: Path, states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Write ``audit/*.json``, ``summary.json`` and ``golden.jsonl`` (each atomically); returns the summary."""
    records = [query_record(st) for st in states]
    make_dirs(out_dir / AUDIT_DIR)
    for name, record in zip(_audit_names([r["query_id"] for r in records]), records, strict=True):
        write_json(out_dir / AUDIT_DIR / name, json_safe(record))
    summary = summarise(records)
    write_json(out_dir / SUMMARY_FILE, json_safe(summary))
    lines = "".join(json.dumps({"query_id": r["query_id"], "query": r["query"], "judgments": r["judgments"],
                                "ranking": r["refined_order"]}, ensure_ascii=False) + "\n"
                    for r in records if r["judgments"])  # a query whose pool was empty has nothing to serve
    atomic_write_bytes(out_dir / GOLDEN_FILE, lines.encode("utf-8"))
    return summary


#: the entries of an output directory that a build writes (and ``--overwrite`` may remove)
OWNED = (GOLDEN_FILE, SUMMARY_FILE, AUDIT_DIR, STATE_DIR)


def _owned(name: str) -> bool:
    return name in OWNED or any(name.startswith(f".{owned}.tmp-") for owned in OWNED)


def check_out_dir(out_dir: Path) -> None:
    """Refuse an output directory the builder did not create: one that exists and is not a
    directory, or holds anything but a build's own files without a build's state (``--out .``)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir} exists and is not a directory")
    if not out_dir.exists() or (out_dir / STATE_DIR / BUILD_FILE).is_file():
        return
    foreign = sorted(e.name for e in out_dir.iterdir() if not _owned(e.name))
    if foreign:
        raise ValueError(f"{out_dir} holds files that no golden build wrote ({', '.join(foreign[:3])}…): "
                         "name a new or empty directory")


def lock_out_dir(out_dir: Path) -> WriterLock:
    """The build's writer lock on ``out_dir`` (``.state/lock``; the folders are created): a second
    build of the same folder, with or without ``--overwrite``, is refused with an error naming the
    folder and the holder's pid before it makes a judge call or removes a file. The kernel drops the
    lock when its holder dies, so a killed build never leaves the folder locked."""
    make_dirs(out_dir / STATE_DIR)
    return WriterLock(out_dir / STATE_DIR / LOCK_FILE, folder=out_dir)


def _remove(entry: Path) -> None:
    if entry.is_dir():
        shutil.rmtree(entry)
    else:
        entry.unlink()


def remove_outputs(out_dir: Path) -> None:
    """Delete what a build wrote into ``out_dir`` (``--overwrite``) and nothing else: its state
    (but the lock, which the caller holds), ``golden.jsonl``, ``summary.json``, the ``audit/*.json``
    files (the folder once empty) and temporary files of interrupted writes."""
    check_out_dir(out_dir)
    if not out_dir.exists():
        return
    for entry in out_dir.iterdir():
        if not _owned(entry.name):
            continue
        if entry.name == AUDIT_DIR and entry.is_dir():
            for audit in entry.iterdir():
                if audit.suffix == ".json" or audit.name.startswith("."):
                    audit.unlink()
            if not any(entry.iterdir()):
                entry.rmdir()
        elif entry.name == STATE_DIR and entry.is_dir():
            for state in entry.iterdir():
                if state.name != LOCK_FILE:  # unlinking a held lock file would let another build lock a new one
                    _remove(state)
        else:
            _remove(entry)
    fsync_dir(out_dir)
