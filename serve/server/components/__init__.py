"""The components behind the ingress, one per module: plain classes (no Ray import), which the hosting
layer builds in process (colocated layout) or wraps as Ray Serve deployments (split layout), both
from the composition root :mod:`serve.server.hosting.graph`.

Data flow (docs/ARCHITECTURE.md): ingress → Searcher (runs :mod:`retrieval.pipeline`: embed,
retrieve, rerank, route) → Embedder / Retriever / Reranker; ``/v1/rerank`` and ``/v1/embeddings``
call the Reranker and the Embedder directly. Every replica records metrics through a
:class:`~serve.telemetry.Recorder` that flushes to the single ``MetricsHub`` replica.

- :mod:`.metrics_hub` ``MetricsHub``; :mod:`.embedder` ``Embedder``; :mod:`.reranker` ``Reranker``
  (also bound as ``CanaryReranker``); :mod:`.retriever` ``Retriever``; :mod:`.searcher` ``Searcher``;
- :mod:`.common`: the helpers every component shares.

Model runtimes are imported inside the constructors, so replicas that hold no model never import
torch from here; this package re-exports nothing, so a replica loads only its own component's
module (the metrics hub never loads FAISS or bm25s).
"""
