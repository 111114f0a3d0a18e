"""The sharded Retriever repeats one shard's call whose replica died (issue 31, finding 10: a shard
with two replicas on two nodes loses no search when one node dies), in process: the real
``ShardedRetriever`` and ``scatter_gather`` over stand-in shards called through the colocated
layout's ``LocalHandle`` (stand-ins for shard replicas, which need Ray; the Ray errors raised are
the real classes). The whole path on a real two-node cluster is
``tests/cluster/test_node_loss.py``."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.shards import ShardAnswer, ShardHits
from steadyrank.serve.server.hosting.colocated import LocalHandle
from steadyrank.serve.server.hosting.shards import ShardedRetriever
from steadyrank.serve.settings import load_settings
from steadyrank.serve.telemetry import MetricsStore, Recorder

VECTOR = np.zeros(4, np.float32)  # the query vector of a dense search (the stand-ins ignore it)


class Shard:
    """A shard replica set: raises each of ``failures`` once (a replica lost), then answers its one
    dense hit."""

    def __init__(self, doc: str, score: float, seq: int, failures: list[BaseException]) -> None:
        self.answer = ShardAnswer(ShardHits([doc], np.asarray([score], np.float32), [seq]), None,
                                  {doc: Document(doc, f"text {doc}")})
        self.failures = failures
        self.calls = 0

    async def search(self, query: str, vector: Any, mode: str, depth: int, with_vectors: bool = False) -> ShardAnswer:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.answer


def retriever(shards: list[Shard], timeout_s: float) -> tuple[Any, MetricsStore]:
    store = MetricsStore()
    settings = load_settings({"index": {"shards": len(shards), "shard_timeout_s": timeout_s},
                              "deployments": {"layout": "split"}})
    front = ShardedRetriever(settings, store, *(LocalHandle(s) for s in shards))
    return front, store


def repeats(front: Any, store: MetricsStore) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    recorder: Recorder = front.recorder
    recorder.flush()
    for family in text_string_to_metric_families(store.render().decode()):
        for sample in family.samples:
            if sample.name == "steadyrank_request_retries_total" and sample.labels.get("reason") == "shard_replica_lost":
                return sample.value
    return 0.0


def test_a_shard_call_whose_replica_died_is_made_again_and_the_search_is_whole() -> None:
    from ray.exceptions import ActorDiedError, ActorUnavailableError

    lost = [ActorUnavailableError("node gone", None), ActorDiedError()]
    shards = [Shard("a", 0.5, 0, []), Shard("b", 0.9, 1, lost)]
    front, store = retriever(shards, timeout_s=5)
    pool = asyncio.run(front.search("q", VECTOR, "dense", 5))
    assert pool.doc_ids == ["b", "a"] and not pool.missing_shards
    assert [s.calls for s in shards] == [1, 3]
    assert repeats(front, store) == 2


def test_a_shard_that_stays_lost_fails_the_search_at_its_timeout_and_other_errors_are_not_repeated() -> None:
    from ray.exceptions import ActorDiedError

    from steadyrank.retrieval.shards import ShardsIncomplete

    gone = Shard("b", 0.9, 1, [ActorDiedError() for _ in range(1000)])
    front, _ = retriever([Shard("a", 0.5, 0, []), gone], timeout_s=0.5)
    with pytest.raises(ShardsIncomplete, match="shard 1"):
        asyncio.run(front.search("q", VECTOR, "dense", 5))
    assert 2 <= gone.calls <= 7  # one attempt per 0.1 s pause, within the shard timeout
    broken = Shard("b", 0.9, 1, [RuntimeError("a bug in the shard")])
    front, store = retriever([Shard("a", 0.5, 0, []), broken], timeout_s=5)
    with pytest.raises(ShardsIncomplete, match="RuntimeError: a bug in the shard"):
        asyncio.run(front.search("q", VECTOR, "dense", 5))
    assert broken.calls == 1 and repeats(front, store) == 0
