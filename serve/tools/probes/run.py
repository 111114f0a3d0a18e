"""Run probe bundles × ablations through a similarity function and collect margins.

``Similarity``: an async callable taking a batch of (query, candidate texts) and returning, per
item, the float32 similarities of the query to each text (cosine of an embedder, FP32 rank keys of a
reranker). In process (``steadyrank probe``), over HTTP (:mod:`.remote`) or through the server's
deployment handles (the shadow evaluator's live probes) — the probe logic is the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from steadyrank.serve.tools.probes.ablations import ablate
from steadyrank.serve.tools.probes.bundles import Bundle
from steadyrank.serve.tools.probes.margins import ProbeRow, margins

Similarity = Callable[[list[tuple[str, list[str]]]], Awaitable[list[np.ndarray]]]
Progress = Callable[[int], object]  # the return value is ignored (tqdm.update returns one)


def cosine_rows(query_vectors: np.ndarray, text_vectors: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Float32 cosines: row i is ``text_vectors[i] @ q_i`` after both are L2-normalised in float32."""
    out = []
    for q, texts in zip(query_vectors, text_vectors, strict=True):
        q = np.asarray(q, dtype=np.float32)
        t = np.asarray(texts, dtype=np.float32)
        q = q / np.linalg.norm(q)
        t = t / np.linalg.norm(t, axis=1, keepdims=True)
        out.append((t @ q).astype(np.float32))
    return out


def embedding_similarity(encode: Callable[[list[str]], Awaitable[np.ndarray]]) -> Similarity:
    """A :data:`Similarity` from an async ``encode(texts) → (n, dim)`` (every text embedded once per batch)."""

    async def similarity(items: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        unique = list(dict.fromkeys([q for q, _ in items] + [t for _, texts in items for t in texts]))
        vectors = np.asarray(await encode(unique), dtype=np.float32)
        where = {text: i for i, text in enumerate(unique)}
        return cosine_rows(vectors[[where[q] for q, _ in items]], [vectors[[where[t] for t in texts]] for _, texts in items])

    return similarity


async def run_probes(bundles: Sequence[Bundle], ablations: Sequence[str], similarity: Similarity,
                     templates: dict[str, dict[str, str]], *, seed: int = 0, batch: int = 32,
                     progress: Progress | None = None) -> list[ProbeRow]:
    """Every bundle under every ablation, ``batch`` bundle renderings per similarity call."""
    jobs = [(b, a, ablate(b, a, templates, seed)) for b in bundles for a in ablations]
    rows = []
    for start in range(0, len(jobs), batch):
        chunk = jobs[start:start + batch]
        sims = await similarity([(r.query, list(r.candidates)) for _, _, r in chunk])
        for (bundle, ablation, _), s in zip(chunk, sims, strict=True):
            values = tuple(float(v) for v in np.asarray(s, dtype=np.float32))
            rows.append(ProbeRow(bundle.id, bundle.lang, ablation, values, margins(values)))
        if progress is not None:
            progress(len(chunk))
    return rows
