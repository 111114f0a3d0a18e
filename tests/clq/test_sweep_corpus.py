"""``clq sweep`` reads its corpus through the one corpus reader: the empty documents of a
Cranfield-like corpus are skipped with the same warning ``index build`` prints (they used to be
refused), ``--strict`` refuses them, and a gzipped corpus reads. Tiny random models (stand-ins, see
conftest): only the corpus handling is checked here."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # sweeps run as CLI subprocesses

DEMO = Path(__file__).resolve().parents[2] / "serve" / "data" / "demo"


def _cranfield_like(path: Path) -> tuple[Path, list[str]]:
    """The demo corpus, gzipped, with two documents no golden query judges emptied (Cranfield has 2)."""
    judged = {d for line in (DEMO / "golden.jsonl").read_text().splitlines() if line.strip()
              for d in json.loads(line)["judgments"]}
    records = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines() if line.strip()]
    emptied = [r["_id"] for r in records if r["_id"] not in judged][:2]
    for r in records:
        if r["_id"] in emptied:
            r["text"] = ""
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    return path, emptied


def _grid(path: Path, embedder: Path, cross: Path) -> Path:
    path.write_text(f"""
embedders: [{{name: tiny, path: {embedder}}}]
dimensions: [full]
ann: [{{name: flat, factory: Flat}}]
first_stages: [dense]
k_policies: [{{name: k5, k: 5}}]
rerankers: [{{name: fp32-hps, path: {cross}}}]
prices: {{rerank_per_1k_tokens: 0.01, generator_per_1k_tokens: 0.1, index_per_gib_month: 5, queries_per_month: 1000}}
generator_chunks: 3
latency: {{stat: p95_ms, queries: 1}}
bounds: {{sla_ms: [1000000], budget: [1000000]}}
bootstrap: {{resamples: 200}}
""")
    return path


def test_sweep_skips_empty_documents_like_index_build(tmp_path: Path, tiny_models) -> None:
    corpus, emptied = _cranfield_like(tmp_path / "corpus.jsonl.gz")
    grid = _grid(tmp_path / "grid.yaml", *tiny_models)
    command = [sys.executable, "-m", "steadyrank.serve.cli", "clq", "sweep", "--grid", str(grid), "--corpus",
               str(corpus), "--golden", str(DEMO / "golden.jsonl"), "--out", str(tmp_path / "out"), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (f"warning: skipped 2 empty document(s) of {len((DEMO / 'corpus.jsonl').read_text().splitlines())} "
            f"in {corpus} (ids: {emptied[0]!r}, {emptied[1]!r}); --strict refuses them") in done.stderr
    assert len(json.loads(done.stdout)["results"]) == 1
    strict = subprocess.run([*command, "--strict"], capture_output=True, text=True, timeout=900)
    assert strict.returncode == 2
    assert f"empty text for id {emptied[0]!r} (field 'text'; --strict refuses empty documents)" in strict.stderr
