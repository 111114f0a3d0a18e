"""The scoring engine at production shapes: a base-size cross-encoder on long passages, in process.

Run::

    .venv/bin/python benchmarks/bench_engine.py [--data BEIR_DIR] [--model DIR] [--device cpu|cuda] \\
        [--precisions fp32,bf16,int8] [--queries 2] [--repeats 3] [--out results.json]

The model is ``--model`` (a cross-encoder folder) or, without it, a BERT-base-shaped cross-encoder
with seeded random weights built here (``benchmarks/_cross_encoders.py``; no Hub). Each request is one
query with ``--docs`` passages, scored through the runtime's own scorer (``load_scorer`` →
``Scorer.score``: tokenisation, length-sorted batches, forward lanes, HPS), one request at a time.
Passage shapes: ``short`` (60–120 words) and ``long`` (300–500 tokens): real passages of ``--data``
(long ones: consecutive corpus passages joined until 300–500 tokens), else seeded random vocabulary
words. Imports only ``steadyrank.serve.runtime``, torch, transformers and numpy (runs where FAISS and
Ray are not installed).

Reported, each a median over ``--repeats`` passes that interleave the variants compared (the machine
may be shared: every pass runs every variant, in a rotating order):

- per precision and shape: docs/s (documents / wall seconds), CPU ms per document (process CPU time:
  the load-independent cost on a shared machine), ms per forward batch, and the padding
  share ``padded tokens / real tokens − 1`` of the runtime's batch plan;
- levers at ``--lever-precision`` on long passages, each against the runtime's current setting:
  ``padding`` (``max_padding`` 1.0: one batch padded to its longest row, 0.25 and 0.1, against
  the runtime's bound, its device's default: length buckets of 0.1 on a CPU, 1.0 on a GPU),
  ``parts`` (``batch_parts`` 1 against the runtime's: a call planned in equal shares, one per lane),
  ``attention`` (transformers' ``sdpa`` against ``eager``; both run un-traced so
  that only the attention differs, beside the runtime's traced forward), ``threads`` (forward lanes ×
  torch threads per lane; CPU only); each variant's ratio to the runtime's, its run-to-run spread
  ``(max − min) / median``, and whether its rank keys equal the runtime's bit for bit;
- a ``torch.profiler`` breakdown of one long request at ``--lever-precision``: the share of self time
  (CPU; on CUDA the ops' GPU time) in linear/matmul, attention, softmax, layernorm, GELU and other.

Scores of a random model mean nothing; the rank-key comparisons say whether a lever changes rankings.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._cross_encoders import build_base_cross_encoder  # noqa: E402
from benchmarks._report import emit, write_json  # noqa: E402

SHAPES = ("short", "long")
SHORT_WORDS = (60, 120)
LONG_TOKENS = (300, 500)
CATEGORIES = ("linear/matmul", "attention", "softmax", "layernorm", "gelu", "copy", "other")
Request = tuple[str, list[str]]


# ---------------------------------------------------------------------------------------------
# inputs


def _real_texts(data: Path, tokenizer: Any, rng: random.Random) -> tuple[list[str], dict[str, list[str]]]:
    """Queries and passages of a BEIR folder: ``short`` ones of 60–120 words, ``long`` ones joined from
    consecutive corpus passages until 300–500 tokens (a join that jumps past 500 starts again)."""
    from steadyrank.retrieval.corpus import read_documents, read_queries

    texts = [d.full_text for d in read_documents(data / "corpus.jsonl")]
    queries = list(read_queries(data / "queries.jsonl").values())
    short = [t for t in texts if SHORT_WORDS[0] <= len(t.split()) <= SHORT_WORDS[1]]
    long: list[str] = []
    parts: list[str] = []
    tokens = 0
    for text in texts[: 20_000]:
        parts.append(text)
        tokens += len(tokenizer(text, add_special_tokens=False)["input_ids"])
        if tokens >= LONG_TOKENS[0]:
            if tokens <= LONG_TOKENS[1]:
                long.append(" ".join(parts))
            parts, tokens = [], 0
        if len(long) >= 2_000:
            break
    if not queries or not short or not long:
        raise SystemExit(f"{data}: no queries, or no short or long passages")
    return queries, {"short": short, "long": long}


def _synthetic_texts(tokenizer: Any, rng: random.Random) -> tuple[list[str], dict[str, list[str]]]:
    """Seeded random words of the tokenizer's vocabulary (whole alphabetic words only)."""
    words = sorted(w for w in tokenizer.get_vocab() if w.isalpha() and len(w) > 2)

    def text(n_words: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n_words))

    def long_text() -> str:
        target = rng.randint(*LONG_TOKENS)
        out = text(target // 2)
        while len(tokenizer(out, add_special_tokens=False)["input_ids"]) < target - 8:
            out += " " + text(8)
        return out

    queries = [text(rng.randint(3, 8)) for _ in range(200)]
    return queries, {"short": [text(rng.randint(*SHORT_WORDS)) for _ in range(400)],
                     "long": [long_text() for _ in range(100)]}


def make_requests(data: Path | None, tokenizer: Any, n_queries: int, n_docs: int, seed: int) -> dict[str, list[Request]]:
    """Per shape: ``n_queries`` requests of ``n_docs`` distinct passages each (seeded picks)."""
    rng = random.Random(seed)
    queries, passages = _real_texts(data, tokenizer, rng) if data else _synthetic_texts(tokenizer, rng)
    return {shape: [(rng.choice(queries), rng.sample(passages[shape], n_docs)) for _ in range(n_queries)]
            for shape in SHAPES}


# ---------------------------------------------------------------------------------------------
# measuring


@dataclass
class Variant:
    """One engine configuration: a loaded scorer and the forward lanes it runs on."""

    name: str
    scorer: Any
    lanes: tuple[int, int]  # (lanes, torch threads per lane)


def _use(variant: Variant) -> None:
    from steadyrank.serve.runtime.lanes import start_lanes, use_forward_lanes

    use_forward_lanes(*variant.lanes)
    start_lanes()


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _cpu_seconds() -> float:
    """CPU seconds this process has used (user + system, all threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_requests(variant: Variant, requests: Sequence[Request], device: str) -> tuple[float, float, list[Any]]:
    """Wall seconds and process CPU seconds to score every request once (one at a time), and each
    request's rank keys. CPU seconds are the load-independent cost on a shared machine (time a
    thread waits preempted is not in them; OpenMP threads spinning at a barrier are)."""
    _use(variant)
    _sync(device)
    start, cpu = time.perf_counter(), _cpu_seconds()
    keys = [variant.scorer.score([(q, d) for d in docs]).keys for q, docs in requests]
    _sync(device)
    return time.perf_counter() - start, _cpu_seconds() - cpu, keys


def plan_facts(scorer: Any, requests: Sequence[Request]) -> dict[str, float]:
    """The runtime's batch plan for ``requests``: forward batches, real and padded tokens."""
    from steadyrank.serve.runtime.batching import plan_batches
    from steadyrank.serve.runtime.tokenization import encode_pairs

    backend, settings = scorer.backend, scorer.settings
    batches = real = padded = 0
    for q, docs in requests:
        lengths = [len(ids) for ids in encode_pairs(backend.tokenizer, [(q, d) for d in docs],
                                                    backend.max_length, "truncate").input_ids]
        plan = plan_batches(lengths, settings.batch_tokens, settings.batch_size,
                            settings.padding_bound(backend.device.type))
        batches += len(plan)
        real += sum(lengths)
        padded += sum(len(rows) * max(lengths[i] for i in rows) for rows in plan)
    return {"batches": batches, "real_tokens": real, "padded_tokens": padded, "padding_share": padded / real - 1}


def compare(variants: Sequence[Variant], requests: Sequence[Request], repeats: int, device: str) -> list[dict[str, Any]]:
    """Every variant ``repeats`` times, interleaved in a rotating order after one warm-up pass each;
    per variant: median seconds, docs/s, ms per batch, spread, ratio to the first variant's docs/s and
    whether its rank keys equal the first's bit for bit (and the largest key difference)."""
    import numpy as np

    times: dict[str, list[float]] = {v.name: [] for v in variants}
    cpu: dict[str, list[float]] = {v.name: [] for v in variants}
    keys: dict[str, list[Any]] = {}
    for v in variants:  # warm-up: oneDNN and cuBLAS pick kernels per shape on first use
        keys[v.name] = run_requests(v, requests, device)[2]
    for r in range(repeats):
        for v in variants[r % len(variants):] + variants[: r % len(variants)]:
            wall, cpu_s, _ = run_requests(v, requests, device)
            times[v.name].append(wall)
            cpu[v.name].append(cpu_s)
    docs = sum(len(d) for _, d in requests)
    base = variants[0].name
    base_rate = docs / statistics.median(times[base])
    rows = []
    for v in variants:
        median = statistics.median(times[v.name])
        facts = plan_facts(v.scorer, requests)
        deltas = [float(np.max(np.abs(a - b))) for a, b in zip(keys[v.name], keys[base], strict=True)]
        rows.append({
            "variant": v.name, "lanes": list(v.lanes), "max_padding": v.scorer.settings.padding_bound(v.scorer.backend.device.type),
            "attention": _attention(v.scorer), "traced": bool(getattr(v.scorer.backend, "traced", False)),
            "seconds": [round(t, 4) for t in times[v.name]], "median_s": round(median, 4),
            "docs_per_s": round(docs / median, 3), "ms_per_batch": round(1000 * median / facts["batches"], 2),
            "spread": round((max(times[v.name]) - min(times[v.name])) / median, 4),
            "cpu_ms_per_doc": round(1000 * statistics.median(cpu[v.name]) / docs, 1),
            "vs_runtime": round(docs / median / base_rate, 4),
            "keys_equal": all(d == 0.0 for d in deltas), "max_key_delta": max(deltas),
            **{k: round(x, 4) if isinstance(x, float) else x for k, x in facts.items()},
        })
    return rows


def _attention(scorer: Any) -> str:
    from steadyrank.serve.runtime.transformers_backend import model_config

    return str(getattr(model_config(scorer.backend.model), "_attn_implementation", "?"))


# ---------------------------------------------------------------------------------------------
# profile


def category(op: str) -> str:
    """Which part of a transformer layer an op name belongs to (attention before matmul: eager
    attention's score and context products are batched matmuls)."""
    name = op.lower()
    if "scaled_dot_product" in name or "attention" in name or "bmm" in name or "fmha" in name or "flash" in name:
        return "attention"
    if "softmax" in name:
        return "softmax"
    if "layer_norm" in name or "layernorm" in name:
        return "layernorm"
    if "gelu" in name:
        return "gelu"
    if name in ("aten::copy_", "aten::clone", "aten::contiguous"):
        return "copy"
    if any(k in name for k in ("addmm", "aten::mm", "linear", "matmul", "gemm")):
        return "linear/matmul"
    return "other"


def profile(variant: Variant, request: Request, device: str) -> dict[str, Any]:
    """Self time by :func:`category` of one request (after a warm-up), on the calling thread's lane
    shape (profiling threads other than the caller's is not reliable, so ``variant`` should run
    without lanes). CPU: self CPU time of every op; CUDA: self GPU time of aten ops."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    run_requests(variant, [request], device)
    with torch_profile(activities=activities) as prof:
        run_requests(variant, [request], device)
    totals = dict.fromkeys(CATEGORIES, 0.0)
    top: dict[str, float] = {}
    for event in prof.key_averages():
        if device == "cuda":
            if not event.key.startswith("aten::"):
                continue
            us = float(event.self_device_time_total)
        else:
            us = float(event.self_cpu_time_total)
        totals[category(event.key)] += us
        top[event.key] = us
    total = sum(totals.values()) or 1.0
    return {
        "variant": variant.name, "lanes": list(variant.lanes), "attention": _attention(variant.scorer),
        "docs": len(request[1]), "total_ms": round(total / 1000, 2),
        "share": {k: round(v / total, 4) for k, v in totals.items()},
        "top_ops_ms": {k: round(v / 1000, 2) for k, v in sorted(top.items(), key=lambda kv: -kv[1])[:12]},
    }


# ---------------------------------------------------------------------------------------------
# main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="BEIR folder with real passages (default: synthetic)")
    parser.add_argument("--model", type=Path, default=None,
                        help="a cross-encoder folder (default: a BERT-base-shaped one with random weights, built here)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precisions", default=None, help="comma list (default: cpu fp32,bf16,int8; cuda fp32,bf16,fp16)")
    parser.add_argument("--shapes", default="short,long", help="passage shapes: short (60–120 words), long (300–500 tokens)")
    parser.add_argument("--levers", default=None, help="comma list of padding,parts,attention,threads (default: all; cuda: no "
                        "threads)")
    parser.add_argument("--lever-precision", default="bf16")
    parser.add_argument("--no-profile", action="store_true", help="skip the torch.profiler breakdown")
    parser.add_argument("--queries", type=int, default=2, help="requests per measured pass")
    parser.add_argument("--docs", type=int, default=20, help="passages per request")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per variant (interleaved)")
    parser.add_argument("--batch-size", type=int, default=None, help="rows per forward batch (default: the runtime's)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads in all (default: torch's)")
    parser.add_argument("--lanes", type=int, default=None, help="forward lanes (default: cpu 2, as a replica; cuda 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "steadyrank-bench-models")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--json", action="store_true", help="table to stderr, only JSON on stdout")
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from steadyrank.serve.runtime import ModelSettings, load_scorer

    logging.getLogger("steadyrank.serve.runtime.lanes").setLevel(logging.ERROR)  # lane changes are the point here
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    threads = args.threads or torch.get_num_threads()
    lanes = args.lanes or (2 if args.device == "cpu" and threads >= 2 else 1)
    runtime_lanes = (lanes, max(1, threads // lanes))
    precisions = (args.precisions or ("fp32,bf16,int8" if args.device == "cpu" else "fp32,bf16,fp16")).split(",")
    shapes = [s for s in args.shapes.split(",") if s]
    levers = (args.levers or ("padding,parts,attention,threads" if args.device == "cpu" else "padding,parts,attention")).split(",")
    levers = [x for x in levers if x]

    started = time.perf_counter()
    model = args.model or build_base_cross_encoder(args.cache_dir, args.seed)
    built_s = time.perf_counter() - started
    tokenizer = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    requests = make_requests(args.data, tokenizer, args.queries, args.docs, args.seed)

    def load(precision: str, **changes: Any) -> Any:
        fields: dict[str, Any] = {"path": str(model), "kind": "cross-encoder", "precision": precision,
                                  "device": args.device, **changes}
        if args.batch_size:
            fields["batch_size"] = args.batch_size
        return load_scorer(ModelSettings(**fields))

    print(f"model {model} (built in {built_s:.1f} s); {len(precisions)} precisions, levers {levers}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    scorers = {p: load(p) for p in precisions}
    for shape in shapes:
        variants = [Variant(p, scorers[p], runtime_lanes) for p in precisions]
        for row in compare(variants, requests[shape], args.repeats, args.device):
            rows.append({"shape": shape, "precision": row.pop("variant"), **row})
        print(f"precisions on {shape}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    lever_rows: dict[str, list[dict[str, Any]]] = {}
    long = requests["long"]
    lp = args.lever_precision
    runtime = Variant("runtime", scorers[lp] if lp in scorers else load(lp), runtime_lanes)
    lever_variants: dict[str, Callable[[], list[Variant]]] = {
        "padding": lambda: [runtime] + [Variant(f"max_padding {bound:g}", load(lp, max_padding=bound), runtime_lanes)
                                        for bound in (1.0, 0.25, 0.1)],
        "attention": lambda: _attention_variants(runtime, load(lp, torchscript=False), load(lp, torchscript=False)),
        "parts": lambda: [runtime, Variant("batch_parts 1", load(lp, batch_parts=1), runtime_lanes)],
        "threads": lambda: [runtime] + [Variant(f"{n} lanes x {threads // n}", runtime.scorer, (n, threads // n))
                                        for n in sorted({1, 2, threads} - {lanes}) if threads % n == 0],
    }
    for lever in levers:
        lever_rows[lever] = compare(lever_variants[lever](), long, args.repeats, args.device)
        print(f"lever {lever}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    profiles = []
    if not args.no_profile:
        whole = Variant(f"{lp} 1 lane x {threads}", runtime.scorer, (1, threads))
        profiles.append(profile(whole, long[0], args.device))
        if "attention" in levers:
            eager = load(lp, torchscript=False)
            eager.backend.model.set_attn_implementation("eager")
            profiles.append(profile(Variant(f"{lp} eager attention, 1 lane x {threads}", eager, (1, threads)),
                                    long[0], args.device))

    payload = {
        "benchmark": "bench_engine",
        "model": str(model) if args.model else "BERT-base-shaped cross-encoder, random weights (seed "
                                               f"{args.seed}, benchmarks/_cross_encoders.py)",
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "data": "BEIR folder (--data)" if args.data else f"synthetic (seed {args.seed})",
        "queries": args.queries, "docs_per_query": args.docs, "repeats": args.repeats,
        "torch_threads": threads, "runtime_lanes": list(runtime_lanes),
        "torch": torch.__version__, "transformers": __import__("transformers").__version__,
        "model_build_s": round(built_s, 1), "wall_s": round(time.perf_counter() - started, 1),
        "precisions": rows, "levers": lever_rows, "profiles": profiles,
    }
    table = [[r["shape"], r["precision"], r["docs_per_s"], r["cpu_ms_per_doc"], r["ms_per_batch"], r["padding_share"],
              r["vs_runtime"], r["spread"]] for r in rows]
    table += [[f"lever {lever}", r["variant"], r["docs_per_s"], r["cpu_ms_per_doc"], r["ms_per_batch"],
               r["padding_share"], r["vs_runtime"], r["spread"]] for lever, lever_list in lever_rows.items()
              for r in lever_list]
    table += [[f"profile {p['variant']}", ", ".join(f"{k} {v:.0%}" for k, v in p["share"].items()), "", "",
               p["total_ms"], "", "", ""] for p in profiles]
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["shape / lever", "variant", "docs/s", "CPU ms/doc", "ms/batch", "padding", "vs first", "spread"], table,
         json_only=args.json)


def _attention_variants(runtime: Variant, sdpa: Any, eager: Any) -> list[Variant]:
    """The runtime's forward, and un-traced forwards with SDPA and with eager attention."""
    eager.backend.model.set_attn_implementation("eager")
    return [runtime, Variant("sdpa, untraced", sdpa, runtime.lanes), Variant("eager, untraced", eager, runtime.lanes)]


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
