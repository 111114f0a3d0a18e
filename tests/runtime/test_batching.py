"""Batching: every input once, longest first, rows ≤ batch_size, rows × longest ≤ budget, minimal padding."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.serve.runtime.batching import MIN_SHARE_TOKENS, pad, plan_batches, run_batched_many


@settings(max_examples=150, deadline=None)
@given(lengths=st.lists(st.integers(1, 600), min_size=1, max_size=300), budget=st.integers(64, 20000),
       size=st.integers(1, 64), max_padding=st.sampled_from([0.0, 0.1, 0.25, 1.0]))
def test_plan_covers_every_input_within_budget(lengths: list[int], budget: int, size: int, max_padding: float) -> None:
    plan = plan_batches(lengths, budget, size, max_padding)
    flat = np.concatenate(plan)
    assert sorted(flat.tolist()) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for k, rows in enumerate(plan):
        longest = max(lengths[i] for i in rows)
        assert rows.size <= size and (rows.size == 1 or rows.size * longest <= budget)
        assert all(lengths[i] >= (1 - max_padding) * longest for i in rows)
        # greedy: a batch stops only at a bound (or at the end of the input)
        if k + 1 < len(plan):
            following = lengths[plan[k + 1][0]]
            assert rows.size == size or (rows.size + 1) * longest > budget or following < (1 - max_padding) * longest


def test_padding_bound_splits_a_request_by_length() -> None:
    lengths = [203, 190, 185, 160, 120, 119, 80, 75]
    assert [b.tolist() for b in plan_batches(lengths, 8192, 32, 1.0)] == [list(range(8))]  # one batch, padded to 203
    assert [[lengths[i] for i in b] for b in plan_batches(lengths, 8192, 32, 0.1)] == [
        [203, 190, 185], [160], [120, 119], [80, 75]]


def test_pad_sides() -> None:
    assert pad([[1, 2, 3], [4]], 0, "right").tolist() == [[1, 2, 3], [4, 0, 0]]
    assert pad([[1, 2, 3], [4]], 0, "left").tolist() == [[1, 2, 3], [0, 0, 4]]


def test_run_batched_returns_rows_in_input_order_padded_per_batch() -> None:
    seqs = [[7] * n for n in (3, 9, 1, 5, 9, 2)]
    widths: list[int] = []

    def forward(batch):
        widths.append(batch.input_ids.shape[1])
        return batch.attention_mask.sum(dim=1, keepdim=True)  # each row's true length

    out = run_batched_many([(seqs, None)], forward=forward, batch_tokens=18, batch_size=8, pad_id=0,
                           padding_side="right", device=torch.device("cpu"))[0]
    assert out[:, 0].tolist() == [3, 9, 1, 5, 9, 2]
    # batches {9, 9}, {5, 3, 2}, {1}: each padded to its own longest row (in any order: forward lanes that
    # an earlier test of this process started run batches concurrently)
    assert sorted(widths) == [1, 5, 9]
    widths.clear()
    run_batched_many([(seqs, None)], forward=forward, batch_tokens=1000, batch_size=4, pad_id=0,
                     padding_side="left", device=torch.device("cpu"))
    assert sorted(widths) == [2, 9]  # {9, 9, 5, 3}, {2, 1}: the row bound binds


@settings(max_examples=150, deadline=None)
@given(lengths=st.lists(st.integers(1, 600), min_size=1, max_size=300), budget=st.integers(64, 20000),
       size=st.integers(1, 64), max_padding=st.sampled_from([0.0, 0.1, 1.0]), parts=st.integers(2, 4))
def test_plan_in_parts_keeps_every_bound(lengths: list[int], budget: int, size: int, max_padding: float,
                                         parts: int) -> None:
    """Planning in parts only tightens the bounds: every input once, longest first, rows ≤ batch_size,
    rows × longest ≤ budget (a lone over-long row aside), and, split in P = min(parts, ⌊T / 2048⌋) parts,
    no batch over 1/P of the call's T tokens unless it is one row."""
    plan = plan_batches(lengths, budget, size, max_padding, parts)
    flat = np.concatenate(plan)
    assert sorted(flat.tolist()) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    split = min(parts, max(1, sum(lengths) // MIN_SHARE_TOKENS))
    share = -(-sum(lengths) // split) if split > 1 else budget
    for rows in plan:
        longest = max(lengths[i] for i in rows)
        assert rows.size <= size and (rows.size == 1 or rows.size * longest <= min(budget, share))
    if split == 1:  # a call too small to split is planned as without parts
        assert [b.tolist() for b in plan] == [b.tolist() for b in plan_batches(lengths, budget, size, max_padding)]


def test_plan_in_parts_splits_a_call_evenly_over_the_lanes() -> None:
    """20 rows of 300 tokens at 8 per batch: 8 + 8 + 4 in one part (the last batch leaves one of two
    lanes idle), 4 batches of 5 in two; 40 rows of 500 tokens: 8 batches of 5 in four parts, 6 of 6–7
    in two; 100 rows of 100 in two: 14 batches of 7–8. A call of fewer than 2 × 2048 tokens is not
    split (small batches cost more per token than a lane idle at the end saves)."""
    assert [b.size for b in plan_batches([300] * 20, 8192, 8, 0.1)] == [8, 8, 4]
    assert [b.size for b in plan_batches([300] * 20, 8192, 8, 0.1, parts=2)] == [5, 5, 5, 5]
    assert [b.size for b in plan_batches([500] * 40, 8192, 8, 0.1, parts=4)] == [5] * 8
    assert [b.size for b in plan_batches([500] * 40, 8192, 8, 0.1, parts=2)] == [7, 7, 7, 7, 6, 6]
    assert [b.size for b in plan_batches([100] * 100, 8192, 8, 0.1, parts=2)] == [8, 8] + [7] * 12
    assert [b.size for b in plan_batches([100] * 20, 8192, 8, 0.1, parts=2)] == [8, 8, 4]  # 2,000 tokens
    assert [b.size for b in plan_batches([400] * 5, 8192, 8, 0.1, parts=2)] == [5]
