"""Client dialects: the request/response shapes of other rerank and embedding APIs, served by the
same internal rerank and embedding paths of the ingress.

One module per dialect, each holding that dialect's pydantic models (they generate the OpenAPI
schema) and pure translation functions (vendor request → internal arguments, internal result →
vendor response):

- :mod:`.cohere`: Cohere v1 extras (``rank_fields``, dict documents, ``max_chunks_per_doc``) and
  ``POST /v2/rerank`` (``ClientV2``);
- :mod:`.tei`: Hugging Face Text Embeddings Inference ``POST /rerank`` and ``POST /embed``;
- :mod:`.infinity`: Infinity's ``/rerank`` body (``documents`` instead of ``texts``) on TEI's path;
- :mod:`.embeddings`: Jina ``[{"text": ...}]`` inputs and OpenAI ``dimensions`` (Matryoshka);
- :mod:`.names`: model names and aliases; :mod:`.documents`: per-document token truncation;
- :mod:`.contract`: the OpenAPI schema with the server's limits written into it.

See ``docs/ARCHITECTURE.md``.
"""
