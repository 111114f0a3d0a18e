"""A sharded index: N ordinary index directories under one parent, searched by scatter-gather
(docs/ARCHITECTURE.md, "Sharded index"). One module per job:

- ``on_disk``: the layout (``SHARDS.json``, sets of shards, the writer's lock), the stable
  assignment :func:`shard_of` and the corpus-wide BM25 statistics file;
- ``gather``: scatter-gather: one shard's answer, the exact merge and the async gather with its deadline;
- ``build``: :func:`build_sharded_index`, a new set of shards written beside the live one;
- ``sharded_index``: the loaded index, every shard in one process (:class:`ShardedIndex`) or one
  of them (:func:`open_shard`).

The names below are imported on first use (PEP 562), as in ``retrieval/__init__.py``: a name
loads only the submodule that defines it.
"""

from typing import TYPE_CHECKING

from steadyrank.lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker sees; at run time __getattr__ below imports each name on first use
    from steadyrank.retrieval.index import open_index
    from steadyrank.retrieval.shards.build import build_sharded_index
    from steadyrank.retrieval.shards.gather import (
        Gathered,
        ShardAnswer,
        ShardHits,
        ShardsIncomplete,
        answer_from_store,
        merge_answers,
        merge_hits,
        scatter_gather,
    )
    from steadyrank.retrieval.shards.on_disk import read_shards_manifest, shard_of
    from steadyrank.retrieval.shards.sharded_index import ShardedIndex, open_shard

#: public name → the submodule that defines it
_EXPORTS: dict[str, str] = {
    "open_index": "steadyrank.retrieval.index",  # the path serve/server/golden_guard.py imports it from
    "build_sharded_index": "steadyrank.retrieval.shards.build",
    "read_shards_manifest": "steadyrank.retrieval.shards.on_disk",
    "shard_of": "steadyrank.retrieval.shards.on_disk",
    "Gathered": "steadyrank.retrieval.shards.gather",
    "ShardAnswer": "steadyrank.retrieval.shards.gather",
    "ShardHits": "steadyrank.retrieval.shards.gather",
    "ShardsIncomplete": "steadyrank.retrieval.shards.gather",
    "answer_from_store": "steadyrank.retrieval.shards.gather",
    "merge_answers": "steadyrank.retrieval.shards.gather",
    "merge_hits": "steadyrank.retrieval.shards.gather",
    "scatter_gather": "steadyrank.retrieval.shards.gather",
    "ShardedIndex": "steadyrank.retrieval.shards.sharded_index",
    "open_shard": "steadyrank.retrieval.shards.sharded_index",
}

# sorted(_EXPORTS), spelled out: a type checker reads only a literal __all__ (tests/test_layout.py checks both)
__all__ = [
    "Gathered", "ShardAnswer", "ShardHits", "ShardedIndex", "ShardsIncomplete", "answer_from_store",
    "build_sharded_index", "merge_answers", "merge_hits", "open_index", "open_shard", "read_shards_manifest",
    "scatter_gather", "shard_of",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
