"""Probe similarities from a running steadyrank server over HTTP (``--url``, ``--api-key``).

Embeddings: ``POST /v1/embeddings`` (cosine computed here, float32). Rerank: ``POST /v1/rerank``;
the response carries ``relevance_score`` (φ of the FP32 rank key under HPS), not the key itself,
so remote reranker margins are on φ's scale and a saturated φ can tie where the keys differ.
"""

from __future__ import annotations

import numpy as np

from steadyrank.serve.tools.probes.run import Similarity, embedding_similarity


def _client(url: str, api_key: str | None, timeout_s: float):
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s)


def _check(response) -> dict:
    if response.status_code != 200:
        raise ValueError(f"{response.request.url} answered HTTP {response.status_code}: {response.text[:200]}")
    return response.json()


def remote_encode(url: str, api_key: str | None = None, *, model: str | None = None, timeout_s: float = 60.0):
    """An async ``encode(texts) → (n, dim) float32`` over the server's ``/v1/embeddings``, the texts
    embedded as queries (``input_type: search_query``: after the model's query prompt)."""

    async def encode(texts: list[str]) -> np.ndarray:
        body = {"input": texts, "input_type": "search_query", **({"model": model} if model else {})}
        async with _client(url, api_key, timeout_s) as client:
            data = _check(await client.post("/v1/embeddings", json=body))["data"]
        return np.array([d["embedding"] for d in sorted(data, key=lambda d: d["index"])], dtype=np.float32)

    return encode


def remote_embeddings(url: str, api_key: str | None = None, *, model: str | None = None, timeout_s: float = 60.0) -> Similarity:
    """Cosines from the server's ``/v1/embeddings``."""
    return embedding_similarity(remote_encode(url, api_key, model=model, timeout_s=timeout_s))


def remote_rerank(url: str, api_key: str | None = None, *, model: str | None = None, timeout_s: float = 60.0) -> Similarity:
    """``relevance_score`` of each candidate from the server's ``/v1/rerank`` (module docstring)."""

    async def similarity(items: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        out = []
        async with _client(url, api_key, timeout_s) as client:
            for query, texts in items:
                body = {"query": query, "documents": texts, **({"model": model} if model else {})}
                results = _check(await client.post("/v1/rerank", json=body))["results"]
                scores = np.zeros(len(texts), dtype=np.float32)
                for r in results:
                    scores[r["index"]] = r["relevance_score"]
                out.append(scores)
        return out

    return similarity
