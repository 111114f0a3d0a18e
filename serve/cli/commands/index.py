"""``steadyrank index build|add|delete|compact|info``: the durable FAISS + BM25 index directory."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, get_args

from tqdm import tqdm

from steadyrank.retrieval.bm25 import BM25_METHODS, Bm25Settings
from steadyrank.retrieval.dense import DenseSettings
from steadyrank.retrieval.fsio import IndexWriteError
from steadyrank.retrieval.index import open_index
from steadyrank.retrieval.protocols import Embedder, Reranker
from steadyrank.retrieval.shards import build_sharded_index
from steadyrank.retrieval.store import build_index
from steadyrank.serve.cli.options import add_corpus_arguments, load_corpus
from steadyrank.serve.output import dumps_json
from steadyrank.serve.runtime.settings import Precision

BUNDLED = "bundled"


def load_embedder_arg(path: str | None, precision: Precision = "auto", prompts: dict[str, str] | None = None) -> Embedder:
    """The embedder at ``path`` (a bi-encoder directory), or the bundled all-MiniLM-L6-v2 if None,
    in ``precision`` (``auto``: BF16 where the device has fast BF16, else FP32), with ``prompts``
    replacing its folder's (None: the folder's)."""
    from steadyrank.serve.runtime import ModelSettings, load_embedder

    return load_embedder(ModelSettings(path=path, precision=precision, prompts=prompts))


def prompts_arg(text: str) -> dict[str, str]:
    """``--embedder-prompts``: a JSON object of prompt name → prompt text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise argparse.ArgumentTypeError('a JSON object of prompt name → text, e.g. {"query": "query: ", '
                                         '"document": "passage: "}')
    return value


def load_reranker_arg(model: str, precision: Precision) -> Reranker:
    """A reranker from a model directory (cross-encoder, causal-LM reranker or bi-encoder), or the
    bundled all-MiniLM-L6-v2 bi-encoder (FP32 dot product under HPS) for ``"bundled"``."""
    from steadyrank.serve.runtime import ModelSettings, load_scorer

    return load_scorer(ModelSettings(path=None if model == BUNDLED else model, precision=precision))


def add_embedder_argument(parser: argparse.ArgumentParser, *, served: bool = False) -> None:
    """``--embedder`` / ``--embedder-precision``; ``served``: unset means the served settings' embedder
    (:mod:`serve.cli.commands.served`) instead of the bundled MiniLM in ``auto``."""
    model = "the served settings' embedder" if served else "the bundled all-MiniLM-L6-v2"
    precision = "the served settings' embedder precision" if served else "auto"
    parser.add_argument("--embedder", metavar="PATH", default=None,
                        help=f"bi-encoder model directory (default: {model}); must be the one the index was built with")
    parser.add_argument("--embedder-precision", choices=get_args(Precision), default=None if served else "auto",
                        help=f"the embedder's forward precision (default {precision}; auto: bf16 where the device has "
                             "fast BF16, else fp32); search an index with the precision it was built with")
    parser.add_argument("--embedder-prompts", type=prompts_arg, default=None, metavar="JSON",
                        help="prompts replacing the embedder folder's config_sentence_transformers.json ones, as "
                             "JSON: 'query' goes before queries, 'document' (or 'passage', 'corpus') before indexed "
                             "documents; '{}' = none (default: the folder's); the index records them and refuses "
                             "other ones")


def add_batch_size_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch-size", type=int, default=256, metavar="DOCS",
                        help="documents per embedding batch (default %(default)s)")


def progress_bar(total: int, desc: str) -> tqdm:
    """A documents progress bar on stderr."""
    return tqdm(total=total, desc=desc, unit="doc", file=sys.stderr, dynamic_ncols=True)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        help="build and maintain a FAISS + BM25 index directory",
        description=(
            "An index directory holds a FAISS index (ids = slots), a BM25 index (bm25s), the documents "
            "and a manifest with checksums, as copy-on-write generations behind an atomic CURRENT "
            "pointer; adds and deletes go to an fsynced write-ahead log. A crash never leaves a "
            "half-written index live."
        ),
    )
    commands = parser.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    build = commands.add_parser(
        "build", help="embed a corpus and write a new index",
        description="Embed the corpus (JSONL, .jsonl.gz, TSV/CSV, Parquet or a BEIR folder; fields chosen by "
                    "--id-field/--text-field/--title-field) and write the index to the folder DIR. A previous "
                    "index in DIR stays live until the new one is complete (--overwrite needed to replace it).",
    )
    add_corpus_arguments(build)
    build.add_argument("--out", required=True, metavar="DIR", help="index folder to create or replace")
    build.add_argument("--factory", default="Flat",
                       help="FAISS index_factory string over inner product: Flat (exact, default), "
                            "'HNSW32,Flat', 'IVF1024,SQ8', 'IVF256,PQ32', 'OPQ32,IVF256,PQ32', …")
    build.add_argument("--ef-construction", type=int, default=DenseSettings.ef_construction,
                       help="HNSW build breadth (default %(default)s)")
    build.add_argument("--ef-search", type=int, default=DenseSettings.ef_search,
                       help="HNSW search breadth, recorded as the index default (default %(default)s)")
    build.add_argument("--nprobe", type=int, default=DenseSettings.nprobe,
                       help="IVF lists probed per query, recorded as the index default (default %(default)s)")
    add_embedder_argument(build)
    build.add_argument("--no-bm25", action="store_true", help="skip the BM25 index (dense search only)")
    build.add_argument("--stemmer", default=Bm25Settings.stemmer,
                       help="PyStemmer algorithm for BM25 terms, or 'none' (default %(default)s)")
    build.add_argument("--stopwords", default=Bm25Settings.stopwords,
                       help="bm25s stopword list (en, fr, de, …) or 'none' (default %(default)s)")
    build.add_argument("--bm25-method", choices=BM25_METHODS, default=Bm25Settings.method,
                       help="BM25 variant (default %(default)s)")
    build.add_argument("--k1", type=float, default=Bm25Settings.k1, help="BM25 k1 (default %(default)s)")
    build.add_argument("--b", type=float, default=Bm25Settings.b, help="BM25 b (default %(default)s)")
    add_batch_size_argument(build)
    build.add_argument("--shards", type=int, default=1,
                       help="split the corpus into N shard indexes under DIR (document id → shard by "
                            "sha256(id) mod N; BM25 scored with corpus-wide statistics); default %(default)s = unsharded")
    build.add_argument("--overwrite", action="store_true", help="replace an existing index in DIR")
    build.add_argument("--json", action="store_true", help="print the manifest as JSON")
    build.set_defaults(func=run_build)

    add = commands.add_parser(
        "add", help="add documents (durable on return)",
        description="Embed and add the documents of DOCS (same formats, fields and empty-document rule as "
                    "build). Ids already in the index are refused. Each call is one fsynced write-ahead-log record.",
    )
    add.add_argument("--index", required=True, metavar="DIR")
    add_corpus_arguments(add, flag="--docs", help="documents to add")
    add_embedder_argument(add)
    add_batch_size_argument(add)
    add.add_argument("--json", action="store_true", help="print the index state as JSON")
    add.set_defaults(func=run_add)

    delete = commands.add_parser(
        "delete", help="delete documents by id (durable on return)",
        description="Delete documents by id. Unknown ids are refused and nothing is deleted.",
    )
    delete.add_argument("--index", required=True, metavar="DIR")
    delete.add_argument("--ids", nargs="+", default=[], metavar="ID", help="document ids")
    delete.add_argument("--ids-file", metavar="FILE", help="file with one document id per line")
    delete.add_argument("--json", action="store_true", help="print the index state as JSON")
    delete.set_defaults(func=run_delete)

    compact = commands.add_parser(
        "compact", help="fold the write-ahead log into a new generation",
        description="Write a new generation holding only live documents (rebuilds FAISS, retraining IVF, "
                    "and BM25) and swap it in atomically; empties the write-ahead log.",
    )
    compact.add_argument("--index", required=True, metavar="DIR")
    compact.add_argument("--json", action="store_true", help="print the new manifest as JSON")
    compact.set_defaults(func=run_compact)

    info = commands.add_parser("info", help="verify an index and show its manifest and state")
    info.add_argument("--index", required=True, metavar="DIR")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=run_info)


def _optional(name: str) -> str | None:
    return None if name.lower() == "none" else name


def _report(args: argparse.Namespace, state: dict[str, Any], headline: str) -> int:
    """Print ``IndexStore.info()`` as JSON (``--json``) or as one line."""
    if args.json:
        print(dumps_json(state))
        return 0
    bm25 = "with BM25" if state["bm25"] else "no BM25"
    prompts = {role: text for role, text in state["embedder"].get("prompts", {}).items() if text}
    said = "".join(f", {role} prompt {text!r}" for role, text in sorted(prompts.items()))
    print(
        f"{headline}: {state['path']} ({state['generation_dir']}): {state['live_count']} documents, "
        f"factory {state['dense']['factory']!r}, embedder {state['embedder']['model_id']} "
        f"(dim {state['embedder']['dim']}{said}), {bm25}, {state['wal_records']} logged changes"
    )
    return 0


def run_build(args: argparse.Namespace) -> int:
    corpus = load_corpus(args, args.corpus)
    documents = corpus.documents
    dense = DenseSettings(args.factory, args.ef_construction, args.ef_search, args.nprobe)
    bm25 = None if args.no_bm25 else Bm25Settings(
        k1=args.k1, b=args.b, method=args.bm25_method,
        stemmer=_optional(args.stemmer), stopwords=_optional(args.stopwords),
    )
    if args.shards < 1:
        raise ValueError(f"--shards must be ≥ 1, got {args.shards}")
    embedder = load_embedder_arg(args.embedder, args.embedder_precision, args.embedder_prompts)
    options = {"dense": dense, "bm25": bm25, "batch_size": args.batch_size, "overwrite": args.overwrite,
               "skipped_empty": len(corpus.skipped_empty)}
    with progress_bar(len(documents), "embedding") as bar:
        if args.shards > 1:
            manifest = build_sharded_index(args.out, documents, embedder, shards=args.shards,
                                           on_progress=bar.update, **options)
        else:
            manifest = build_index(args.out, documents, embedder, on_progress=bar.update, **options)
    print(f"built in {manifest['build_seconds']:.1f} s", file=sys.stderr)
    with open_index(args.out) as store:
        return _report(args, store.info(), "built and verified")


@contextmanager
def one_line_write_errors(nothing_done: str) -> Iterator[None]:
    """Turn a failed write (disk full, I/O error) into the CLI's one-line error: the store's own
    message (which says what was and was not done), else ``nothing_done`` and the OS error."""
    try:
        yield
    except IndexWriteError as exc:
        raise ValueError(str(exc)) from None
    except OSError as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError)):
            raise
        raise ValueError(f"{nothing_done}: {exc}") from None


def run_add(args: argparse.Namespace) -> int:
    documents = load_corpus(args, args.docs).documents
    embedder = load_embedder_arg(args.embedder, args.embedder_precision, args.embedder_prompts)
    with one_line_write_errors("nothing was added"), open_index(args.index, embedder, writable=True) as store:
        with progress_bar(len(documents), "embedding") as bar:
            added = store.add(documents, batch_size=args.batch_size, on_progress=bar.update)
        return _report(args, store.info(), f"added {added}")


def run_delete(args: argparse.Namespace) -> int:
    ids = list(args.ids)
    if args.ids_file:
        with open(args.ids_file, encoding="utf-8") as handle:
            ids += [line.strip() for line in handle if line.strip()]
    if not ids:
        raise ValueError("no ids given (--ids or --ids-file)")
    with one_line_write_errors("nothing was deleted"), open_index(args.index, writable=True) as store:
        try:
            deleted = store.delete(ids)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        return _report(args, store.info(), f"deleted {deleted}")


def run_compact(args: argparse.Namespace) -> int:
    with open_index(args.index, writable=True) as store:
        store.compact()
        return _report(args, store.info(), "compacted")


def run_info(args: argparse.Namespace) -> int:
    with open_index(args.index) as store:
        return _report(args, store.info(), "verified")
