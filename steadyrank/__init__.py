"""steadyrank: reranking middleware with HPS scoring, tie-aware metrics and live quality monitoring.

One import root; its parts live in the repository's top-level folders (see docs/ARCHITECTURE.md):

- ``steadyrank.metrics``   (``metrics/``)   tie-aware and RAG metrics, numpy only;
- ``steadyrank.retrieval`` (``retrieval/``) indexes, fusion, routing, the search pipeline;
- ``steadyrank.serve``     (``serve/``)     model runtimes, the Ray Serve application, the CLI.
"""
