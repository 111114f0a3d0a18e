"""In-process CPU throughput of one cross-encoder per precision and batch plan (no server).

Run::

    .venv/bin/python benchmarks/bench_cpu_precision.py --data BEIR_DIR [--precisions fp32,bf16,int8,ort-int8] \\
        [--max-padding 0.1,0.25,1.0] [--batch-size 8,16] [--requests 30] --out results.json

The model is bench_peers' cross-encoder (the bundled MiniLM body with a seeded 1-logit head); the
inputs are ``--requests`` requests of ``--docs`` TREC passages of 60–120 words (seeded picks). Each
configuration loads ``load_scorer(ModelSettings(precision, batch_size, max_padding))``, runs the
forward on the server's lanes (``--lanes`` × ``--threads-per-lane`` torch threads, as a Reranker
replica with ``torch_threads`` 2 and ``forward_lanes`` 2), scores every request once to warm up
(oneDNN builds its kernels per shape), then ``--repeats`` timed passes: docs/s = documents / best
pass wall time; ``vs_bf16`` is that over the BF16 row's at the same batch plan (same run). Also
reported: batches per request and padding share of the planned tokens, and whether a request's
scores are bitwise the same in every pass (``stable``). JSON carries commit,
argv, UTC date and the load average before/after.

Besides the runtime's precisions, ``--precisions`` takes two int8 alternatives measured beside
them: ``int8@ENGINE`` quantises the runtime's int8 model under torch's quantised engine ``ENGINE``
(``x86``, the default, ``fbgemm`` or ``onednn``; the engine packs the weights, so it picks the
kernels), and ``ort-int8`` runs ONNX Runtime's dynamic int8 model in the runtime's scorer
(``benchmarks/_ort_int8.py``; ``pip install -e '.[bench-ort]'`` adds ``onnxruntime`` and ``onnx``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._report import emit, write_json  # noqa: E402
from benchmarks.bench_peers import build_cross_encoder, load_texts  # noqa: E402


def load_path(precision: str, settings: Any, cache_dir: Path, threads_per_lane: int) -> Any:
    """The scorer of one ``--precisions`` entry: a runtime precision, ``int8@ENGINE`` or ``ort-int8``."""
    import torch

    from steadyrank.serve.runtime import load_scorer

    if precision == "ort-int8":
        from benchmarks._ort_int8 import ort_int8_scorer

        return ort_int8_scorer(settings, cache_dir, threads_per_lane)
    name, _, engine = precision.partition("@")
    if not engine:
        return load_scorer(settings.model_copy(update={"precision": name}))
    if name != "int8" or engine not in torch.backends.quantized.supported_engines:
        raise SystemExit(f"{precision!r}: ENGINE of int8@ENGINE must be one of {torch.backends.quantized.supported_engines}")
    default, torch.backends.quantized.engine = torch.backends.quantized.engine, engine
    try:
        return load_scorer(settings.model_copy(update={"precision": "int8"}))
    finally:
        torch.backends.quantized.engine = default


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder of queries and passages")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "steadyrank" / "bench_peers")
    parser.add_argument("--precisions", default="fp32,bf16,int8",
                        help="comma-separated runtime precisions, int8@ENGINE or ort-int8 (default %(default)s)")
    parser.add_argument("--max-padding", default="0.1", help="comma-separated max_padding values (default %(default)s)")
    parser.add_argument("--batch-size", default="8", help="comma-separated batch_size values (default %(default)s)")
    parser.add_argument("--requests", type=int, default=30, help="requests per pass (default %(default)s)")
    parser.add_argument("--docs", type=int, default=20, help="documents per request (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes (default %(default)s)")
    parser.add_argument("--lanes", type=int, default=2, help="forward lanes (default %(default)s)")
    parser.add_argument("--threads-per-lane", type=int, default=1, help="torch threads per lane (default %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()

    from steadyrank.serve.runtime import ModelSettings
    from steadyrank.serve.runtime.batching import plan_batches
    from steadyrank.serve.runtime.lanes import start_lanes, use_forward_lanes
    from steadyrank.serve.runtime.tokenization import encode_pairs

    queries, passages = load_texts(args.data)
    rng = random.Random(0)
    requests = [[(rng.choice(queries), p) for p in rng.sample(passages, args.docs)] for _ in range(args.requests)]
    cross = build_cross_encoder(args.cache_dir)
    use_forward_lanes(args.lanes, args.threads_per_lane)
    start_lanes()
    rows, table = [], []
    for precision in args.precisions.split(","):
        for batch_size in map(int, args.batch_size.split(",")):
            for max_padding in map(float, args.max_padding.split(",")):
                settings = ModelSettings(path=str(cross), batch_size=batch_size, max_padding=max_padding)
                scorer = load_path(precision, settings, args.cache_dir, args.threads_per_lane)
                backend = scorer.backend
                planned = real = batches = 0
                for pairs in requests:
                    lengths = [len(ids) for ids in encode_pairs(backend.tokenizer, pairs, backend.max_length,
                                                                "truncate").input_ids]
                    plan = plan_batches(lengths, settings.batch_tokens, batch_size, max_padding)
                    batches += len(plan)
                    planned += sum(len(b) * max(lengths[i] for i in b) for b in plan)
                    real += sum(lengths)
                first = [scorer.score(pairs).keys for pairs in requests]  # warm-up pass
                best, stable = float("inf"), True
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    keys = [scorer.score(pairs).keys for pairs in requests]
                    best = min(best, time.perf_counter() - started)
                    stable &= all(k.tobytes() == f.tobytes() for k, f in zip(keys, first, strict=True))
                resolved = "int8" if precision == "ort-int8" else scorer.precision
                row = {"precision": precision, "resolved": resolved, "batch_size": batch_size,
                       "max_padding": max_padding, "docs_per_s": args.requests * args.docs / best,
                       "batches_per_request": batches / args.requests, "padding_share": 1 - real / planned,
                       "traced": backend.traced, "stable": stable, "loadavg_1m": os.getloadavg()[0]}
                rows.append(row)
                table.append([precision, batch_size, max_padding, row["docs_per_s"], row["batches_per_request"],
                              row["padding_share"], stable, row["loadavg_1m"]])
                print(json.dumps(row), file=sys.stderr, flush=True)
                del scorer, backend
    for row in rows:  # ratios within this run: docs/s over BF16's at the same batch plan
        bf16 = next((r for r in rows if r["precision"] == "bf16" and r["batch_size"] == row["batch_size"]
                     and r["max_padding"] == row["max_padding"]), None)
        row["vs_bf16"] = row["docs_per_s"] / bf16["docs_per_s"] if bf16 else None
    payload = {"benchmark": "bench_cpu_precision",
               "cross_encoder": str(cross), "requests": args.requests, "docs": args.docs,
               "lanes": args.lanes, "threads_per_lane": args.threads_per_lane, "rows": rows}
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["precision", "batch", "max_padding", "docs/s", "batches/req", "padding", "stable", "load 1m"],
         table, json_only=True)


if __name__ == "__main__":
    main()
