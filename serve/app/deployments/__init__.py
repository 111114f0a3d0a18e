"""The Ray Serve deployments behind the ingress, one per module, bound by :func:`serve.app.builder.build_app`.

Data flow (docs/ARCHITECTURE.md): ingress → Searcher (runs :mod:`retrieval.pipeline`: embed,
retrieve, rerank, route) → Embedder / Retriever / Reranker; ``/v1/rerank`` and ``/v1/embeddings``
call the Reranker and the Embedder directly. Every replica records metrics through a
:class:`~serve.telemetry.Recorder` that flushes to the single ``MetricsHub`` replica.

- :mod:`.metrics_hub` ``MetricsHub``; :mod:`.embedder` ``Embedder``; :mod:`.reranker` ``Reranker``
  (also bound as ``CanaryReranker``); :mod:`.retriever` ``Retriever``; :mod:`.searcher` ``Searcher``;
- :mod:`.common`: the helpers every deployment shares.

Model runtimes are imported inside the constructors, so replicas that hold no model never import
torch from here; this package re-exports nothing, so a replica loads only its own deployment's
module (the metrics hub never loads FAISS or bm25s).
"""

from steadyrank.serve.app.replica_grpc import bind_replica_grpc_to_node

bind_replica_grpc_to_node()  # in a replica on a loopback node: its gRPC server on loopback, not [::]
