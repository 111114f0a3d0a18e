"""Peer benchmark: steadyrank against Infinity (``infinity-emb``) with the same models, side by side.

Run::

    # Infinity in a virtual environment of its own (this script installs nothing):
    python3 -m venv .infinity-venv
    .infinity-venv/bin/pip install torch==2.13.0 "infinity-emb[server,torch]"
    # then, from the repository root:
    .venv/bin/python benchmarks/bench_peers.py --infinity-bin .infinity-venv/bin/infinity_emb --data BEIR_DIR \\
        [--duration 20] [--warmup 3] [--rows all] [--out peers.json] [--json]

Models: the cross-encoder (``--cross-encoder``) is the bundled all-MiniLM-L6-v2 body (``minilm``) or a
seeded random BERT-base body (``base``: 12 layers, 768 hidden, the compute of bge-reranker-base), each
with a seeded (``torch.manual_seed``) 1-logit head, a ``BertForSequenceClassification`` saved once
under ``--cache-dir``; the embedder
is the bundled all-MiniLM-L6-v2. Both servers run them at ``--precision`` on the CPU (default FP32;
``bf16``/``auto``: steadyrank BF16+HPS against Infinity ``--dtype bfloat16``; ``int8``: steadyrank's
dynamic int8 against Infinity's ``--dtype int8``; ``--infinity-dtype`` overrides Infinity's):

- Infinity: ``infinity_emb v2 --model-id CROSS --model-id EMB --engine torch --device cpu
  --dtype float32 --batch-size 32 --served-model-name cross-encoder --served-model-name embedder``
  (``HF_HUB_OFFLINE=1``), torch threads capped by
  ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` = ``--threads``;
- ``infinity-optimum``: Infinity's optimum engine (ONNX Runtime) on the cross-encoder only (rerank
  rows), from a ``model.onnx`` exported once beside a copy of it (``optimum-cli export onnx --task
  text-classification``, from Infinity's venv: ``pip install "infinity-emb[optimum]"``), started
  with ``--model-id .`` from that folder;
- steadyrank: ``steadyrank serve --config`` a generated settings file: the same two models at ``--precision``,
  ``torch_threads`` = ``--threads`` on the Reranker and Embedder, the shadow evaluator off, every
  other setting at its default (what a user gets). Its Ray runs in a temporary folder of its own
  (``RAY_TMPDIR``), so its processes are told apart from any other Ray on the machine.

One server at a time: prepare it (steadyrank: ``serve --check`` builds the embedded default's
index once, as a first start does; a restart finds it, so it is not part of the cold start), start
it, wait for the first successful rerank (cold start = launch → that answer), measure the
machine's and the server tree's CPU over ``--idle-s`` seconds idle, run every row, stop it
(SIGTERM, then SIGKILL of whatever of its tree is left).

Rows (closed loop, ``aiohttp`` async clients, :func:`benchmarks._load.client_session`; documents from
the BEIR folder in ``--data`` (``--passages short``: its passages of 60–120 words; ``long``: documents
of 300–500 tokens, each joined from passages drawn at random); every request a fresh random pick):
rerank 1 doc × 1 client; 20 docs × 1, 8, 32, 128 clients; 100 docs × 1, 8, 32 clients; embeddings
1 text × 1 client; 16 texts × 8 clients. Each row is measured over a :class:`benchmarks._load.Window` (``--warmup``, ``--duration``,
``--max-duration``); requests still in flight at its end get ``--drain-s`` seconds, then are
cancelled.

Per row and server: the headline figure, goodput within the deadline = documents (texts) answered 200
within ``--deadline-s`` (30 s) of being sent / s (a client with a 30 s timeout gets nothing from a later
answer); goodput = all successful docs / s; req/s = answered requests (any status)
/ s; p50/p95/p99 of the successful ones; the status mix (transport errors by exception name), how many
503s were JSON and carried ``Retry-After`` and the median time a 503 took; the highest 1-minute load average seen during the row.
Per server: peak RSS of the whole process tree (sampled every 0.5 s with psutil; the process count
at the peak), cold start, idle CPU (% of all cores: the server tree's own, and the machine's, which
includes anything else running). Ratios are steadyrank / each other server (goodput within the
deadline, footprint).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._cross_encoders import build_base_cross_encoder, save_model_folder  # noqa: E402
from benchmarks._load import TreeSampler, closed_loop, free_port  # noqa: E402
from benchmarks._report import emit, git, write_json  # noqa: E402

#: (row name, endpoint kind, items per request, client counts)
ROWS: list[tuple[str, str, int, tuple[int, ...]]] = [
    ("rerank-1", "rerank", 1, (1,)),
    ("rerank-20", "rerank", 20, (1, 8, 32, 128)),
    ("rerank-100", "rerank", 100, (1, 8, 32)),
    ("embed-1", "embed", 1, (1,)),
    ("embed-16", "embed", 16, (8,)),
]


def log(message: str) -> None:
    print(f"bench_peers: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# inputs and models


def load_texts(data: Path, min_words: int = 60, max_words: int = 120) -> tuple[list[str], list[str]]:
    """(queries, passages of ``min_words``–``max_words`` words) of a BEIR folder."""
    from steadyrank.retrieval.corpus import read_documents, read_queries

    passages = [d.full_text for d in read_documents(data / "corpus.jsonl")
                if min_words <= len(d.full_text.split()) <= max_words]
    queries = list(read_queries(data / "queries.jsonl").values())
    if not passages or not queries:
        raise SystemExit(f"no queries or no {min_words}–{max_words}-word passages in {data}")
    return queries, passages


def long_passages(data: Path, tokenizer_dir: Path, min_tokens: int = 300, max_tokens: int = 500,
                  n: int = 400, seed: int = 0) -> list[str]:
    """``n`` documents of ``min_tokens``–``max_tokens`` tokens (the cross-encoder's own tokenizer, no
    special tokens), each made by joining passages of ``data`` drawn at random without replacement
    until the next one would pass ``max_tokens`` (MS MARCO passages are ~60 words: none is that long)."""
    from transformers import AutoTokenizer

    from steadyrank.retrieval.corpus import read_documents

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    texts = [d.full_text for d in read_documents(data / "corpus.jsonl")]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    rng = random.Random(seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    documents: list[str] = []
    parts: list[str] = []
    tokens = 0
    for i in order:
        if tokens + lengths[i] > max_tokens:
            if tokens >= min_tokens:
                documents.append(" ".join(parts))
                if len(documents) == n:
                    break
            parts, tokens = [], 0
        parts.append(texts[i])
        tokens += lengths[i]
    if not documents:
        raise SystemExit(f"{data}: too few passages to join into {min_tokens}–{max_tokens}-token documents")
    return documents


#: cross-encoder bodies: "minilm" = the bundled all-MiniLM-L6-v2 (6 layers, 384 hidden, 22 M parameters);
#: "base" = a BERT-base shape with seeded random weights (:func:`benchmarks._cross_encoders.build_base_cross_encoder`)
CROSS_ENCODER_SIZES = ("minilm", "base")


def build_cross_encoder(cache_dir: Path, size: str = "minilm", seed: int = 0) -> Path:
    """A cross-encoder with a seeded (``torch.manual_seed``) 1-logit head, a
    ``BertForSequenceClassification`` saved under ``cache_dir`` once: the bundled MiniLM body
    (``size`` "minilm") or a seeded random BERT-base body (``size`` "base"), both with the bundled tokenizer."""
    if size == "base":
        return build_base_cross_encoder(cache_dir, seed)
    target = cache_dir / f"minilm-l6-cross-encoder-seed{seed}"
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    from steadyrank.serve.runtime import bundled_embedder_path

    source = str(bundled_embedder_path())
    torch.manual_seed(seed)
    model = BertForSequenceClassification.from_pretrained(source, num_labels=1, local_files_only=True).eval()
    return save_model_folder(model, AutoTokenizer.from_pretrained(source, local_files_only=True), target)


# ---------------------------------------------------------------------------------------------
# servers


@dataclass
class Peer:
    """How to start one server and talk to it."""

    name: str
    command: list[str]
    env: dict[str, str]
    rerank_path: str
    embed_path: str
    rerank_model: str | None  # the "model" field of a request (Infinity serves two models)
    embed_model: str | None
    ray_tmp: Path | None = None
    prepare: list[str] | None = None  # run once before the launch, not timed (steadyrank: build the index)
    cwd: Path | None = None  # working folder of the launch (Infinity's optimum engine: the model's own)
    rows_kinds: tuple[str, ...] = ("rerank", "embed")  # the row kinds it serves

    def rerank_body(self, query: str, docs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "documents": docs, "return_documents": False}
        return body | ({"model": self.rerank_model} if self.rerank_model else {})

    def embed_body(self, texts: list[str]) -> dict[str, Any]:
        return {"input": texts} | ({"model": self.embed_model} if self.embed_model else {})

    def extra_processes(self) -> list[Any]:
        """Processes of this server's own Ray session (found by its temp folder) that may have been
        re-parented away from the launched process."""
        import psutil

        if self.ray_tmp is None:
            return []
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if str(self.ray_tmp) in " ".join(proc.info["cmdline"] or []):
                    found.append(proc)
            except psutil.Error:
                continue
        return found


PEER_NAMES = ("infinity", "infinity-optimum", "steadyrank", "steadyrank-proxy", "steadyrank-baseline")
#: steadyrank precision → Infinity's ``--dtype`` at the same precision (int8: Infinity's own int8 mode;
#: auto: what steadyrank's auto picks on this machine, see :func:`infinity_dtype_for`)
INFINITY_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8"}


def infinity_dtype_for(precision: str) -> str:
    """Infinity's ``--dtype`` for steadyrank's ``precision`` (``auto`` resolved on this CPU first)."""
    from steadyrank.serve.runtime.precision import choose_for

    return INFINITY_DTYPES[choose_for(precision, "cpu").precision]


def _infinity_env(threads: int) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1"}


def infinity_peer(binary: str, cross: Path, embedder: Path, port: int, threads: int, batch: int,
                  dtype: str) -> Peer:
    command = [binary, "v2", "--model-id", str(cross), "--model-id", str(embedder), "--engine", "torch",
               "--device", "cpu", "--dtype", dtype, "--batch-size", str(batch), "--port", str(port),
               "--host", "127.0.0.1", "--no-bettertransformer",
               "--served-model-name", "cross-encoder", "--served-model-name", "embedder"]
    return Peer("infinity", command, _infinity_env(threads), "/rerank", "/embeddings", "cross-encoder", "embedder")


def export_onnx(binary: str, cross: Path) -> Path:
    """``cross`` with a ``model.onnx`` beside its weights (``optimum-cli export onnx --task
    text-classification``, from Infinity's venv), made once in a sibling folder."""
    target = cross.with_name(cross.name + "-onnx")
    if not (target / "model.onnx").is_file():
        cli = Path(binary).with_name("optimum-cli")
        if not cli.is_file():
            raise RuntimeError(f"{cli}: no such file (install infinity-emb[optimum] in Infinity's venv)")
        subprocess.run([str(cli), "export", "onnx", "--task", "text-classification", "--model", str(cross),
                        str(target)], check=True, env=_infinity_env(2), stdout=subprocess.DEVNULL)
    return target


def infinity_optimum_peer(binary: str, cross: Path, port: int, threads: int, batch: int) -> Peer:
    """Infinity's optimum engine (ONNX Runtime, FP32) serving the cross-encoder only: it runs from the
    exported folder with ``--model-id .`` (an absolute path fails in its ``model.onnx`` lookup)."""
    folder = export_onnx(binary, cross)
    command = [binary, "v2", "--model-id", ".", "--engine", "optimum", "--device", "cpu",
               "--batch-size", str(batch), "--port", str(port), "--host", "127.0.0.1",
               "--served-model-name", "cross-encoder"]
    return Peer("infinity-optimum", command, _infinity_env(threads), "/rerank", "/embeddings", "cross-encoder",
                None, cwd=folder, rows_kinds=("rerank",))


def steadyrank_peer(name: str, cross: Path, embedder: Path, port: int, threads: int, workdir: Path,
                    precision: str, cache: Path, python: str = sys.executable) -> Peer:
    """``steadyrank``: the default settings; ``steadyrank-proxy``: the same with ``server.ingress: proxy``
    (Ray Serve's Python proxy in front instead of HAProxy), for an A/B of the HTTP front in one run;
    ``steadyrank-baseline``: the default settings run by ``python`` (another checkout's interpreter,
    e.g. the commit before a change), for an A/B of two versions in one run.
    ``cache``: its ``cache_dir``, kept across runs, so the embedded index and ``precision: auto``'s
    measurement (made once per model and CPU) are a restart's, not a first start's."""
    settings: dict[str, Any] = {
        "cache_dir": str(cache),
        "embedder": {"path": str(embedder), "precision": precision},
        "reranker": {"path": str(cross), "precision": precision},
        "quality": {"enabled": False},
        "deployments": {"reranker": {"torch_threads": threads}, "embedder": {"torch_threads": threads}},
    }
    if name == "steadyrank-proxy":
        settings["server"] = {"ingress": "proxy"}
    config = workdir / f"{name}-settings.json"
    config.write_text(json.dumps(settings, indent=2))
    ray_tmp = Path(tempfile.mkdtemp(prefix="srpeer-", dir="/tmp"))  # short: Ray's unix sockets live under it
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=str(ray_tmp), RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1")
    command = [python, "-m", "steadyrank.serve.cli", "serve", "--config", str(config), "--port", str(port)]
    prepare = [python, "-m", "steadyrank.serve.cli", "serve", "--config", str(config), "--check"]
    return Peer(name, command, env, "/v1/rerank", "/v1/embeddings", None, None, ray_tmp, prepare)


class Running:
    """A launched server: its process (own session), log file, tree sampler and cold start."""

    def __init__(self, peer: Peer, port: int, log_path: Path, start_timeout_s: float) -> None:
        import httpx

        self.peer, self.url, self.log_path = peer, f"http://127.0.0.1:{port}", log_path
        launched = time.perf_counter()
        with log_path.open("wb") as out:
            self.process = subprocess.Popen(peer.command, stdout=out, stderr=subprocess.STDOUT, env=peer.env,
                                            start_new_session=True, cwd=peer.cwd)
        self.sampler = TreeSampler(self.process.pid, peer.extra_processes).start()
        body = peer.rerank_body("warm up", ["a short passage to score"])
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{peer.name} exited with {self.process.returncode}; log: {log_path}")
            try:
                response = httpx.post(f"{self.url}{peer.rerank_path}", json=body, timeout=10)
                if response.status_code == 200:
                    break
                if 400 <= response.status_code < 500 and response.status_code != 404:  # 404: route not up yet
                    self.stop()
                    raise RuntimeError(f"{peer.name} refused the warm-up rerank: {response.status_code} {response.text}")
            except httpx.HTTPError:
                pass
            if time.perf_counter() - launched > start_timeout_s:
                self.stop()
                raise RuntimeError(f"{peer.name} did not answer a rerank in {start_timeout_s:.0f} s; log: {log_path}")
            time.sleep(0.25)
        self.cold_start_s = time.perf_counter() - launched

    def stop(self, grace_s: float = 60.0) -> int | None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL whatever of the tree is left."""
        import psutil

        tree = self.sampler.processes()
        self.sampler.stop()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        for proc in [*tree, *self.peer.extra_processes()]:
            try:
                proc.kill()
            except psutil.Error:
                continue
        if self.process.poll() is None:
            self.process.wait()
        if self.peer.ray_tmp is not None:
            shutil.rmtree(self.peer.ray_tmp, ignore_errors=True)
        return self.process.returncode


# ---------------------------------------------------------------------------------------------
# measuring


def bodies_for(peer: Peer, kind: str, items: int, queries: list[str], passages: list[str], n: int = 64,
               seed: int = 0) -> list[bytes]:
    """``n`` request bodies: a query and ``items`` random passages (rerank) or ``items`` passages (embed)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        picks = rng.sample(passages, items)
        body = peer.rerank_body(rng.choice(queries), picks) if kind == "rerank" else peer.embed_body(picks)
        out.append(json.dumps(body).encode())
    return out


def measure(running: Running, queries: list[str], passages: list[str], args: argparse.Namespace,
            rows: list[tuple[str, str, int, tuple[int, ...]]]) -> dict[str, Any]:
    peer = running.peer
    results: dict[str, Any] = {}
    for name, kind, items, levels in rows:
        if kind not in peer.rows_kinds:
            continue
        path = peer.rerank_path if kind == "rerank" else peer.embed_path
        bodies = bodies_for(peer, kind, items, queries, passages)
        for level in levels:
            window = {"duration": args.duration, "warmup": args.warmup, "max_duration": args.max_duration,
                      "min_requests": max(args.min_requests, level)}
            r = asyncio.run(closed_loop(running.url, path, bodies, level, window, drain_s=args.drain_s,
                                        timeout_s=args.client_timeout, honor_retry_after_s=args.honor_retry_after))
            answered = r["requests"] + r["errors"]
            in_time = sum(1 for latency in r.pop("latencies_s") if latency <= args.deadline_s)
            per_s = 1.0 / r["window_s"] if r["window_s"] else 0.0
            r.update(items_per_request=items, clients=level, deadline_s=args.deadline_s,
                     goodput_items_per_s=r["requests"] * items * per_s,
                     goodput_in_deadline_items_per_s=in_time * items * per_s,
                     late_requests=r["requests"] - in_time,
                     answered_rps=answered * per_s)
            results[f"{name}/c{level}"] = r
            log(f"{peer.name} {name} c={level}: {r['goodput_in_deadline_items_per_s']:.1f} items/s within "
                f"{args.deadline_s:g} s ({r['goodput_items_per_s']:.1f} in all), p50 {r['p50_ms']:.0f} ms, "
                f"codes {r['status_codes']}, load {r['loadavg_1m_max']:.1f}")
    return results


def run_peer(peer: Peer, port: int, queries: list[str], passages: list[str], args: argparse.Namespace,
             rows: list, workdir: Path) -> dict[str, Any]:
    import psutil

    if peer.prepare:
        log(f"preparing {peer.name} (not timed): {' '.join(peer.prepare)}")
        with (workdir / f"{peer.name}-prepare.log").open("wb") as out:
            subprocess.run(peer.prepare, stdout=out, stderr=subprocess.STDOUT, env=peer.env, check=True)
    log(f"starting {peer.name}: {' '.join(peer.command)}")
    running = Running(peer, port, workdir / f"{peer.name}.log", args.start_timeout)
    try:
        log(f"{peer.name}: first rerank answered {running.cold_start_s:.1f} s after launch")
        models = served_models(running)
        time.sleep(args.settle_s)
        machine_before = psutil.cpu_times()
        tree_cpu = running.sampler.cpu_percent(args.idle_s)
        after = psutil.cpu_times()
        busy = (sum(after) - after.idle - after.iowait) - (sum(machine_before) - machine_before.idle - machine_before.iowait)
        machine_cpu = 100.0 * busy / max(sum(after) - sum(machine_before), 1e-9)
        log(f"{peer.name}: idle CPU over {args.idle_s:g} s: tree {tree_cpu:.1f}% of the machine, "
            f"machine {machine_cpu:.1f}%")
        results = measure(running, queries, passages, args, rows)
        running.sampler.sample()
        footprint = {"cold_start_s": running.cold_start_s, "peak_rss_mb": running.sampler.peak_mb,
                     "processes_at_peak": running.sampler.processes_at_peak,
                     "rss_at_peak_mb_by_process": dict(sorted(running.sampler.rss_at_peak_mb.items(), key=lambda kv: -kv[1])),
                     "idle_cpu_pct_by_process": dict(sorted(running.sampler.idle_cpu_pct.items(), key=lambda kv: -kv[1])),
                     "idle_cpu_tree_pct": tree_cpu, "idle_cpu_machine_pct": machine_cpu, "idle_window_s": args.idle_s}
    finally:
        code = running.stop()
    footprint["exit_code_after_sigterm"] = code
    return {"rows": results, "footprint": footprint, "log": str(running.log_path), "models": models}


def checkout_commit(python: str) -> str | None:
    """The git commit of the checkout whose ``steadyrank`` package ``python`` imports (None if unknown)."""
    found = subprocess.run([python, "-c", "import steadyrank.serve, os; print(os.path.dirname(steadyrank.serve.__file__))"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
    if found.returncode != 0:
        return None
    return git("rev-parse", "HEAD", repo=Path(found.stdout.strip())) or None


def served_models(running: Running) -> Any:
    """The server's model list (``/v1/models`` or Infinity's ``/models``): what precision it runs."""
    import httpx

    path = "/v1/models" if running.peer.rerank_path.startswith("/v1") else "/models"
    try:
        return httpx.get(f"{running.url}{path}", timeout=10).json()
    except (httpx.HTTPError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


FOOTPRINT_FIELDS = ("peak_rss_mb", "processes_at_peak", "cold_start_s", "idle_cpu_tree_pct", "idle_cpu_machine_pct")


def comparison_table(peers: dict[str, Any]) -> list[list[Any]]:
    """One line per row and server (goodput within the deadline, all goodput, p50, p99, status mix,
    steadyrank's goodput within the deadline / this server's, the highest load average), then one per
    footprint field and server (the ratio steadyrank / this server's)."""
    measured = {name: peer for name, peer in peers.items() if "rows" in peer}
    ours = measured.get("steadyrank")
    keys = list(dict.fromkeys(key for peer in measured.values() for key in peer["rows"]))
    table: list[list[Any]] = []
    for key in keys:
        mine = ours["rows"].get(key) if ours else None
        for name, peer in measured.items():
            row = peer["rows"].get(key)
            if row is None:
                continue
            versus = ratio(mine["goodput_in_deadline_items_per_s"], row["goodput_in_deadline_items_per_s"]) \
                if mine is not None and name != "steadyrank" else None
            table.append([key, name, row["goodput_in_deadline_items_per_s"], row["goodput_items_per_s"],
                          row["p50_ms"], row["p99_ms"], json.dumps(row["status_codes"]), versus,
                          row["loadavg_1m_max"]])
    for field in FOOTPRINT_FIELDS:
        for name, peer in measured.items():
            value = peer["footprint"][field]
            versus = ratio(ours["footprint"][field], value) if ours and name != "steadyrank" else None
            table.append([field, name, value, None, None, None, None, versus, None])
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:9]))
    parser.add_argument("--infinity-bin", required=True, help="path of Infinity's infinity_emb (in its own venv)")
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder of queries and passages (the "
                        "TREC-DL 2019 subset in the published runs; docs/data.md says where to get one)")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "steadyrank" / "bench_peers",
                        help="where the cross-encoder is saved once (default %(default)s)")
    parser.add_argument("--cross-encoder", choices=CROSS_ENCODER_SIZES, default="minilm",
                        help="the cross-encoder body: minilm (the bundled all-MiniLM-L6-v2) or base (a random "
                             "BERT-base shape, 110 M parameters) (default %(default)s)")
    parser.add_argument("--passages", choices=("short", "long"), default="short",
                        help="short: passages of 60–120 words; long: documents of 300–500 tokens joined from "
                             "random passages (default %(default)s)")
    parser.add_argument("--deadline-s", type=float, default=30.0,
                        help="the headline figure counts documents answered 200 within this many seconds "
                             "(default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per model (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32, help="Infinity --batch-size (default %(default)s)")
    parser.add_argument("--precision", choices=["auto", *sorted(INFINITY_DTYPES)], default="fp32",
                        help="steadyrank's precision for both models, always with HPS (default %(default)s)")
    parser.add_argument("--infinity-dtype", choices=sorted(set(INFINITY_DTYPES.values())), default=None,
                        help="Infinity's --dtype (default: the one matching --precision)")
    parser.add_argument("--rows", default="all",
                        help="comma-separated row names to run: " + ", ".join(r[0] for r in ROWS) + " (default all)")
    parser.add_argument("--clients", default="", help="comma-separated client counts to keep of the "
                        "selected rows (default: every count of each row)")
    parser.add_argument("--peers", default="infinity,steadyrank", help="which servers, in order, from "
                        f"{', '.join(PEER_NAMES)} (default %(default)s; steadyrank-proxy: steadyrank with "
                        "server.ingress proxy; steadyrank-baseline: steadyrank run by --baseline-python; the "
                        "ratio columns compare steadyrank with each other server)")
    parser.add_argument("--baseline-python", default=None,
                        help="the interpreter that runs the steadyrank-baseline peer: another checkout's "
                             "virtual environment (e.g. the commit before a change), with its own cache_dir")
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per row at least (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds per row (default %(default)s)")
    parser.add_argument("--min-requests", type=int, default=10,
                        help="completions per window at least (default %(default)s, or the client count if larger)")
    parser.add_argument("--max-duration", type=float, default=180.0, help="seconds per row at most (default %(default)s)")
    parser.add_argument("--drain-s", type=float, default=120.0,
                        help="seconds the requests in flight at a window's end get before they are cancelled "
                             "(default %(default)s)")
    parser.add_argument("--client-timeout", type=float, default=600.0, help="client timeout per request, s "
                        "(default %(default)s)")
    parser.add_argument("--honor-retry-after", type=float, default=0.0,
                        help="a client that got a 503 with Retry-After waits that long (capped at this many s) "
                             "before its next request, as SDKs do; 0 (default) = it retries at once")
    parser.add_argument("--idle-s", type=float, default=10.0, help="idle CPU measurement, s (default %(default)s)")
    parser.add_argument("--settle-s", type=float, default=5.0, help="pause after the first rerank before the "
                        "idle measurement, s (default %(default)s)")
    parser.add_argument("--start-timeout", type=float, default=600.0, help="seconds to the first rerank at most")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--json", action="store_true", help="table to stderr, only JSON on stdout")
    args = parser.parse_args()
    # SIGTERM (a `timeout`, a CI cancel) unwinds like Ctrl-C, so the server being measured is stopped
    # (Running.stop in run_peer's finally) instead of outliving this process in its own session
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not Path(args.infinity_bin).is_file():
        raise SystemExit(f"--infinity-bin {args.infinity_bin}: no such file (see --help for how to install Infinity)")
    wanted = {r.strip() for r in args.rows.split(",")} if args.rows != "all" else {r[0] for r in ROWS}
    unknown = wanted - {r[0] for r in ROWS}
    if unknown:
        raise SystemExit(f"--rows: unknown row(s) {sorted(unknown)}")
    rows = [r for r in ROWS if r[0] in wanted]
    names = [p.strip() for p in args.peers.split(",") if p.strip()]
    if set(names) - set(PEER_NAMES):
        raise SystemExit(f"--peers: unknown peer(s) {sorted(set(names) - set(PEER_NAMES))}")
    if "steadyrank-baseline" in names and not (args.baseline_python and Path(args.baseline_python).is_file()):
        raise SystemExit(f"--peers steadyrank-baseline needs --baseline-python, an interpreter file "
                         f"(got {args.baseline_python!r})")
    if args.clients:
        levels = {int(c) for c in args.clients.split(",")}
        rows = [(n, k, i, tuple(c for c in cs if c in levels)) for n, k, i, cs in rows]
        rows = [r for r in rows if r[3]]
        if not rows:
            raise SystemExit(f"--clients {args.clients}: no selected row runs at these client counts")

    from steadyrank.serve.runtime import bundled_embedder_path

    embedder = bundled_embedder_path()
    cross = build_cross_encoder(args.cache_dir, args.cross_encoder)
    queries, passages = load_texts(args.data)
    if args.passages == "long":
        passages = long_passages(args.data, cross)
    log(f"{len(passages)} {args.passages} passages, {len(queries)} queries; cross-encoder {cross}")
    workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    infinity_dtype = args.infinity_dtype or infinity_dtype_for(args.precision)
    peers: dict[str, Any] = {}
    for name in names:
        port = free_port()
        try:
            if name == "infinity":
                peer = infinity_peer(args.infinity_bin, cross, embedder, port, args.threads, args.batch_size,
                                     infinity_dtype)
            elif name == "infinity-optimum":
                peer = infinity_optimum_peer(args.infinity_bin, cross, port, args.threads, args.batch_size)
            elif name == "steadyrank-baseline":
                peer = steadyrank_peer(name, cross, embedder, port, args.threads, workdir, args.precision,
                                       args.cache_dir / "steadyrank-baseline-cache", args.baseline_python)
            else:
                peer = steadyrank_peer(name, cross, embedder, port, args.threads, workdir, args.precision,
                                       args.cache_dir / "steadyrank-cache")
            peers[name] = run_peer(peer, port, queries, passages, args, rows, workdir)
        except RuntimeError as exc:  # a server that did not start: keep the other's results
            log(f"{name}: {exc}")
            peers[name] = {"error": str(exc)}


    table = comparison_table(peers)
    payload = {"benchmark": "bench_peers",
               "cpu_count": os.cpu_count(), "threads": args.threads, "precision": args.precision,
               "infinity_dtype": infinity_dtype,
               "infinity_batch_size": args.batch_size, "cross_encoder": str(cross), "embedder": str(embedder),
               "window": {"duration": args.duration, "warmup": args.warmup, "max_duration": args.max_duration,
                          "drain_s": args.drain_s},
               "cross_encoder_size": args.cross_encoder, "passage_shape": args.passages,
               "deadline_s": args.deadline_s, "passages": len(passages), "peers": peers}
    if "steadyrank-baseline" in names:
        payload["baseline"] = {"python": args.baseline_python, "commit": checkout_commit(args.baseline_python)}
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["row / clients", "server", f"items/s within {args.deadline_s:g} s", "items/s", "p50 ms",
                   "p99 ms", "codes", "steadyrank / this", "load max"], table, json_only=args.json)

if __name__ == "__main__":
    main()
