"""Fixtures for the retrieval tests: the real MiniLM embedder and its embeddings, cached per session."""

from __future__ import annotations

import numpy as np
import pytest

from steadyrank.retrieval.corpus import Document
from tests.retrieval.helpers import HashEmbedder, synthetic_documents
from tests.tiers import integration_fixture

RECALL_CORPUS = 1000
RECALL_QUERIES = 100


@pytest.fixture(scope="session")
@integration_fixture
def minilm():
    """The bundled all-MiniLM-L6-v2 through the project's runtime (FP32, HPS)."""
    from steadyrank.serve.runtime import ModelSettings, load_embedder

    return load_embedder(ModelSettings(precision="fp32"))


@pytest.fixture(scope="session")
def minilm_vectors(minilm) -> tuple[np.ndarray, np.ndarray]:
    """Real MiniLM embeddings of a generated corpus and of generated queries (embedded once)."""
    corpus = [d.full_text for d in synthetic_documents(RECALL_CORPUS, seed=11)]
    queries = [d.full_text for d in synthetic_documents(RECALL_QUERIES, seed=12)]
    vectors = minilm.encode(corpus + queries)
    return vectors[:RECALL_CORPUS], vectors[RECALL_CORPUS:]


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def documents() -> list[Document]:
    return synthetic_documents(400)


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the fault-injection totals when ``test_faults`` ran (the closing-note numbers)."""
    import sys

    module = sys.modules.get("tests.retrieval.test_faults")
    if module is not None and module.TOTALS:
        terminalreporter.write_line(
            f"fault injection: {module.TOTALS['faults']} faults injected, "
            f"{module.TOTALS['acknowledged']} acknowledged writes checked"
        )
