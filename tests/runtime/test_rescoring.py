"""Boundary re-scoring settles a tie straddling top_n with FP32 scores and touches nothing else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from steadyrank.retrieval.ranking import rank
from steadyrank.serve.runtime import ModelSettings, load_scorer

DOCS = ["alpha", "the beta release notes", "gamma rays from distant galaxies reach the earth", "delta",
        "an epsilon of room for error in every measurement", "zeta functions"]


def test_rank_reorders_only_the_straddling_group() -> None:
    keys = np.array([0.1, 0.5, 0.9, 0.5, 0.1, 0.5, 0.7], dtype=np.float32)
    # rank: 2 (0.9), 6 (0.7), {1, 3, 5} (0.5) at positions 2-4, {0, 4} (0.1) at positions 5-6
    fine = {1: 0.2, 3: 0.4, 5: 0.3}
    seen: list[list[int]] = []

    def rescore(indices: np.ndarray) -> np.ndarray:
        seen.append(indices.tolist())
        return np.array([fine[i] for i in indices])

    out = rank(keys, 3, rescore)
    assert seen == [[1, 3, 5]]
    assert out.order.tolist() == [2, 6, 3, 5, 1, 0, 4]
    assert (out.rescored, out.tie_at_cutoff) == (3, False)


def test_rank_reports_ties_it_cannot_or_may_not_settle() -> None:
    keys = np.array([0.5, 0.5, 0.5, 0.9])
    assert rank(keys, 2, lambda idx: np.array([0.3, 0.3, 0.1])).tie_at_cutoff is True
    assert rank(keys, 3, lambda idx: np.array([0.3, 0.3, 0.1])).tie_at_cutoff is False
    unsettled = rank(keys, 2, None)
    assert (unsettled.order.tolist(), unsettled.rescored, unsettled.tie_at_cutoff) == ([3, 0, 1, 2], 0, True)
    for top_n in (None, 1, 4, 10):  # no group crosses these cutoffs
        assert rank(keys, top_n, None).tie_at_cutoff is False


@pytest.fixture(scope="module")
def tied_model(make_cross_encoder) -> Path:
    """A 1-logit cross-encoder whose logits are 4.9896 ± 5e-5 on DOCS: all 5.0 in BF16 (spacing
    2⁻⁵ there), distinct in FP32 (spacing 2⁻²¹)."""

    def edit(model: torch.nn.Module) -> None:
        model.classifier.bias.fill_(5.0)

    return make_cross_encoder(num_labels=1, seed=1, edit=edit)


def test_bf16_straddling_tie_is_settled_by_fp32_forward(tied_model: Path) -> None:
    query = "which document"
    fp32 = load_scorer(ModelSettings(path=str(tied_model), precision="fp32")).rerank(query, DOCS)
    assert len(fp32.tie_groups) == 0
    bf16 = load_scorer(ModelSettings(path=str(tied_model), precision="bf16")).rerank(query, DOCS, top_n=2)
    assert bf16.tie_groups == [list(range(len(DOCS)))]  # the BF16 logits themselves tie
    assert (bf16.rescored, bf16.tie_at_cutoff) == (len(DOCS), False)
    assert bf16.order.tolist() == fp32.order.tolist()


def test_no_rescoring_when_disabled_or_native(tied_model: Path) -> None:
    for settings in (
        ModelSettings(path=str(tied_model), precision="bf16", rescore_boundary_ties=False),
        ModelSettings(path=str(tied_model), precision="bf16", scoring="native"),
    ):
        out = load_scorer(settings).rerank("which document", DOCS, top_n=2)
        assert (out.rescored, out.tie_at_cutoff) == (0, True)
        assert out.order.tolist() == list(range(len(DOCS)))  # ties keep input order
