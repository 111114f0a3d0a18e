"""HPS benchmark: the cost of High-Precision Scoring and the runtime's throughput against peers.

Run: ``python benchmarks/bench_hps.py [--quick] [--out results.json]`` (CPU or CUDA; offline).
``--model DIR`` takes the bi-encoder from a local sentence-transformers directory instead of the
bundled one, ``--cross-model DIR`` a ready cross-encoder instead of building one, ``--device`` picks
the device and ``--throughput-precisions fp32,bf16`` adds throughput rows in other dtypes. On CUDA
every timed call ends with ``torch.cuda.synchronize()``, so the times are of the kernels' work, not
of their launch.

1. **HPS overhead** at one forward batch of 32 (query, document) pairs × 256 tokens: the time of
   φ in FP32 on the upcast logits (``sigmoid(z.float())``) and of φ in the model dtype, each as a
   percentage of the forward pass in that dtype; likewise FP32 normalise + dot for the bi-encoder
   (32 texts × 256 tokens). Target: ≤ 1 %.
2. **Throughput** (pairs/s, texts/s) of ``load_scorer(...).score_pairs`` against
   sentence-transformers ``CrossEncoder.predict`` and of ``load_embedder(...).encode`` against
   ``SentenceTransformer.encode``, same model, same inputs, same run, FP32, max length 256, batch 32
   (ours: ``batch_size=32``, ``batch_tokens=32 × 256``). Runs alternate (ours, peer, ours, …); medians of wall time and of
   this process's CPU time are reported (the CPU ratio is robust to other load on shared cores).
   Target: ratio ≥ 1.0. With ``--throughput-precisions`` both sides also run in each further dtype
   (the peer's weights cast to it); ``throughput`` stays the first dtype's row.

The models are real weights, offline: the bundled all-MiniLM-L6-v2 as the embedder, and as the
cross-encoder a BertForSequenceClassification built from the same MiniLM encoder with a fresh
1-logit head (the architecture and size of cross-encoder/ms-marco-MiniLM-L-6-v2; its scores are
meaningless, its cost is not). Inputs are synthetic passages of 20–120 vocabulary words, seeded.
Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _report import with_provenance, write_json  # benchmarks/ is on sys.path when run as a script

from steadyrank.serve.runtime import ModelSettings, bundled_embedder_path, hps, load_embedder, load_scorer

BATCH, LENGTH = 32, 256


def sync() -> None:
    """Wait for the CUDA kernels queued so far (a no-op without CUDA): a timed call ends here."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``fn`` over ``repeats`` runs after one warm-up run (CUDA: synchronised)."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@dataclass
class Duel:
    """Median wall and process-CPU seconds of two alternating functions, and their last results.

    CPU time (all threads of this process) is robust to other processes sharing the cores;
    wall time is what a caller waits.
    """

    ours_wall: float
    peer_wall: float
    ours_cpu: float
    peer_cpu: float
    ours_result: Any
    peer_result: Any


def alternate(ours: Callable[[], Any], peer: Callable[[], Any], repeats: int) -> Duel:
    """Run ``ours`` and ``peer`` alternately ``repeats`` times each, after one warm-up each."""
    results = [ours(), peer()]
    sync()
    wall: list[list[float]] = [[], []]
    cpu: list[list[float]] = [[], []]
    for _ in range(repeats):
        for i, fn in enumerate((ours, peer)):
            start, start_cpu = time.perf_counter(), time.process_time()
            results[i] = fn()
            sync()
            wall[i].append(time.perf_counter() - start)
            cpu[i].append(time.process_time() - start_cpu)
    m = statistics.median
    return Duel(m(wall[0]), m(wall[1]), m(cpu[0]), m(cpu[1]), results[0], results[1])


def passages(tokenizer: Any, n: int, seed: int) -> list[str]:
    """``n`` seeded passages of 20–120 whole, alphabetic vocabulary words."""
    words = [w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) > 2]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=int(rng.integers(20, 121)))) for _ in range(n)]


def build_cross_encoder(directory: Path, source: Path) -> Path:
    """The MiniLM encoder at ``source`` + a fresh 1-logit head, saved with the MiniLM tokenizer."""
    from transformers import AutoTokenizer, BertForSequenceClassification
    from transformers.utils import logging

    logging.set_verbosity_error()  # the fresh head is intended: no "newly initialized" report
    torch.manual_seed(0)
    BertForSequenceClassification.from_pretrained(str(source), num_labels=1).save_pretrained(directory)
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(directory)
    return directory


def full_batch_inputs(backend: Any, pairs: bool) -> dict[str, torch.Tensor]:
    """One batch of 32 sequences of exactly 256 tokens (random ids, no padding)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 29000, (BATCH, LENGTH), generator=g)
    inputs = {"input_ids": ids.to(backend.device), "attention_mask": torch.ones_like(ids).to(backend.device)}
    if pairs:
        inputs["token_type_ids"] = (torch.arange(LENGTH) >= LENGTH // 2).long().expand(BATCH, -1).to(backend.device)
    return inputs


def hps_overhead(cross_path: Path, embed_path: Path, precision: str, device: str, repeats: int) -> dict[str, float]:
    """Forward time of one 32 × 256 batch and φ times (HPS and native) in ``precision``."""
    settings = ModelSettings(path=str(cross_path), precision=precision, device=device)
    backend = load_scorer(settings).backend
    embed_backend = load_embedder(ModelSettings(path=str(embed_path), precision=precision, device=device)).backend
    out: dict[str, float] = {}
    with torch.inference_mode():
        inputs = full_batch_inputs(backend, pairs=True)
        out["cross_forward_ms"] = 1e3 * median_seconds(lambda: backend.model(**inputs).logits, repeats)
        logits = backend.model(**inputs).logits
        out["cross_phi_hps_ms"] = 1e3 * median_seconds(lambda: hps.logit_scores(logits, "hps"), 50)
        out["cross_phi_native_ms"] = 1e3 * median_seconds(lambda: hps.logit_scores(logits, "native"), 50)
        text_inputs = full_batch_inputs(embed_backend, pairs=False)
        hidden = embed_backend.model(**text_inputs).last_hidden_state
        pooled = hidden.mean(dim=1)
        out["embed_forward_ms"] = 1e3 * median_seconds(lambda: embed_backend.model(**text_inputs), repeats)
        q, d = pooled[:1].expand(BATCH, -1), pooled
        out["embed_phi_hps_ms"] = 1e3 * median_seconds(lambda: hps.dot_scores(q, d, "hps"), 50)
        out["embed_phi_native_ms"] = 1e3 * median_seconds(lambda: hps.dot_scores(q, d, "native"), 50)
    for kind in ("cross", "embed"):
        out[f"{kind}_hps_overhead_pct"] = 100 * out[f"{kind}_phi_hps_ms"] / out[f"{kind}_forward_ms"]
    return out


def throughput(cross_path: Path, embed_path: Path, precision: str, device: str, n_pairs: int, n_texts: int,
               repeats: int) -> dict[str, Any]:
    """Pairs/s and texts/s of the runtime and of sentence-transformers on identical inputs, in ``precision``.

    The peers' weights are cast to the same dtype after loading (a checkpoint saved in FP16 would
    otherwise load in FP16 where transformers reads the checkpoint's dtype).
    """
    from sentence_transformers import CrossEncoder, SentenceTransformer

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    batching = {"batch_size": BATCH, "batch_tokens": BATCH * LENGTH, "precision": precision, "device": device}
    scorer = load_scorer(ModelSettings(path=str(cross_path), max_length=LENGTH, **batching))
    tokenizer = scorer.backend.tokenizer
    docs = passages(tokenizer, n_pairs, seed=1)
    queries = passages(tokenizer, 8, seed=2)
    pairs = [(queries[i % 8][:60], doc) for i, doc in enumerate(docs)]
    peer = CrossEncoder(str(cross_path), device=str(scorer.backend.device), max_length=LENGTH, local_files_only=True)
    _cast(peer, dtype)
    cross = alternate(
        lambda: scorer.score_pairs(pairs)[0],
        lambda: peer.predict(pairs, batch_size=BATCH, show_progress_bar=False),
        repeats,
    )
    embedder = load_embedder(ModelSettings(path=str(embed_path), **batching))
    texts = passages(tokenizer, n_texts, seed=3)
    st = SentenceTransformer(str(embed_path), device=str(embedder.backend.device), local_files_only=True)
    _cast(st, dtype)
    embed = alternate(
        lambda: embedder.encode(texts),
        lambda: st.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False),
        repeats,
    )
    return {
        "precision": precision,
        "pairs": n_pairs,
        "cross_ours_pairs_per_s": n_pairs / cross.ours_wall,
        "cross_peer_pairs_per_s": n_pairs / cross.peer_wall,
        "cross_ratio": cross.peer_wall / cross.ours_wall,
        "cross_cpu_ratio": cross.peer_cpu / cross.ours_cpu,
        "cross_max_abs_score_diff": float(np.abs(cross.ours_result - cross.peer_result).max()),
        "texts": n_texts,
        "embed_ours_texts_per_s": n_texts / embed.ours_wall,
        "embed_peer_texts_per_s": n_texts / embed.peer_wall,
        "embed_ratio": embed.peer_wall / embed.ours_wall,
        "embed_cpu_ratio": embed.peer_cpu / embed.ours_cpu,
        "embed_max_abs_diff": float(np.abs(embed.ours_result - embed.peer_result).max()),
    }


def _cast(peer: Any, dtype: torch.dtype) -> None:
    """Cast a sentence-transformers model's weights to ``dtype`` (the module itself, or its ``.model``)."""
    module = peer if isinstance(peer, torch.nn.Module) else peer.model
    module.to(dtype)


def table(results: dict[str, Any]) -> str:
    """Human-readable summary of the JSON results."""
    lines = [f"HPS overhead at batch {BATCH} x {LENGTH} tokens (median ms; overhead = phi_hps / forward)",
             f"{'precision':<10}{'model':<15}{'forward':>10}{'phi hps':>10}{'phi native':>12}{'overhead':>10}"]
    for precision, row in results["hps_overhead"].items():
        for kind, label in (("cross", "cross-encoder"), ("embed", "bi-encoder")):
            lines.append(f"{precision:<10}{label:<15}{row[f'{kind}_forward_ms']:>10.1f}{row[f'{kind}_phi_hps_ms']:>10.3f}"
                         f"{row[f'{kind}_phi_native_ms']:>12.3f}{row[f'{kind}_hps_overhead_pct']:>9.3f}%")
    for t in results.get("throughput_by_precision", {"": results["throughput"]}).values():
        name = t.get("precision", "fp32").upper()
        lines += ["", f"Throughput, {name} (median; ratio = ours / sentence-transformers, by wall and by CPU time)",
                  f"{'task':<26}{'steadyrank':>12}{'peer':>12}{'ratio':>8}{'cpu ratio':>10}",
                  f"{'CrossEncoder.predict':<26}{t['cross_ours_pairs_per_s']:>8.1f} p/s{t['cross_peer_pairs_per_s']:>8.1f} p/s"
                  f"{t['cross_ratio']:>8.2f}{t['cross_cpu_ratio']:>10.2f}",
                  f"{'SentenceTransformer.encode':<26}{t['embed_ours_texts_per_s']:>8.1f} t/s"
                  f"{t['embed_peer_texts_per_s']:>8.1f} t/s{t['embed_ratio']:>8.2f}{t['embed_cpu_ratio']:>10.2f}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer inputs and repeats (smoke run)")
    parser.add_argument("--precisions", default="fp32,bf16", help="forward dtypes for the overhead (default fp32,bf16)")
    parser.add_argument("--throughput-precisions", default="fp32",
                        help="dtypes of the throughput comparison (default fp32; the first one is 'throughput')")
    parser.add_argument("--model", type=Path, default=None,
                        help="bi-encoder directory (sentence-transformers layout; default: the bundled all-MiniLM-L6-v2); "
                             "the cross-encoder is built from its encoder unless --cross-model is given")
    parser.add_argument("--cross-model", type=Path, default=None,
                        help="ready cross-encoder directory (default: built from --model with a fresh 1-logit head, seed 0)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="default: auto")
    parser.add_argument("--repeats", type=int, help="timed forward passes per overhead row (default 2, --quick 1; "
                        "raise it on a GPU, where one forward takes milliseconds)")
    parser.add_argument("--pairs", type=int, help="pairs per throughput call (default 64, --quick 16)")
    parser.add_argument("--texts", type=int, help="texts per throughput call (default 128, --quick 32)")
    parser.add_argument("--throughput-repeats", type=int, help="alternating throughput rounds (default 3, --quick 1)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    repeats, n_pairs, n_texts = (1, 16, 32) if args.quick else (2, 64, 128)
    throughput_repeats = 1 if args.quick else 3
    repeats, n_pairs, n_texts = args.repeats or repeats, args.pairs or n_pairs, args.texts or n_texts
    throughput_repeats = args.throughput_repeats or throughput_repeats
    embed = args.model or bundled_embedder_path()
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        cross = args.cross_model or build_cross_encoder(Path(tmp) / "minilm-cross-encoder", embed)
        results: dict[str, Any] = {
            "device": device,
            "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "forward_repeats": repeats,
            "throughput_repeats": throughput_repeats,
            "models": {"bi-encoder": str(embed), "cross-encoder": str(args.cross_model or "built from the bi-encoder")},
            "hps_overhead": {p: hps_overhead(cross, embed, p, device, repeats) for p in args.precisions.split(",")},
        }
        rows = {p: throughput(cross, embed, p, device, n_pairs, n_texts, throughput_repeats)
                for p in args.throughput_precisions.split(",")}
        results["throughput"] = next(iter(rows.values()))
        if len(rows) > 1:
            results["throughput_by_precision"] = rows
    print(table(results))
    results = with_provenance(results)
    print(json.dumps(results, indent=2))
    if args.out:
        write_json(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
