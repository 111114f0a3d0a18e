"""Length-sorted, token-budget batching with minimal padding.

Sequences are sorted by length (longest first) and packed greedily: a batch takes the next row
while ``rows ≤ batch_size``, ``rows × longest_row ≤ batch_tokens`` (the padded size of the batch,
in tokens) and ``length ≥ (1 − max_padding) × longest_row`` (no row is more than ``max_padding`` of
its width padding, so the batch is not either), and is padded only to its own longest row.
Results are scattered back into input order, so callers never see the plan.

Why the padding bound: on CPU a padded token costs what a real one does. 20 TREC passages of
75–203 tokens (mean 120) in one batch padded to 203 ran at 35 pairs/s with MiniLM on 2 cores; the
same pairs with ``max_padding`` 0.1 (5.7 batches per request) at 47–49 pairs/s, with 0.0 (one
batch per distinct length) at 36 (smaller batches lose more than padding costs).

Why ``parts``: the batches of one call run on the forward lanes (:mod:`serve.runtime.lanes`), and
a call ends with its slowest lane. 20 documents at ``batch_size`` 8 make batches of 8, 8 and 4
rows: two lanes run the first two, then one lane the last while the other idles (a sixth of the
call). With ``parts`` P > 1 a call of n rows and T tokens is planned as

    B = P · ⌈n / (P · batch_size)⌉                        (a multiple of P batches of ≤ batch_size rows)
    rows of batch k ≤ ⌈(rows not yet planned) / (B − k)⌉    (the rest split evenly over the batches left)
    tokens per batch ≤ min(batch_tokens, ⌈T / P⌉)           (no batch holds more than 1/P of the work)

so 20 rows become 4 batches of 5, 100 rows 14 batches of 7–8 (the padding bound may still add batches).
Simulated on 30 calls each of random TREC-DL documents joined to 300–500 tokens (cost ∝ rows × width ×
(1 + width / 1500), ``max_padding`` 0.1, P = 2), the real work over P × the slowest lane's rose from
0.88 to 0.96 for 20 documents, 0.67 → 0.86 for 10, 0.97 → 0.99 for 100 (0.64 → 0.86 for 5, but those,
~2.2k tokens, stay whole under the floor below); for 20 passages of ≤ 600 characters 0.87 → 0.90.
Small batches cost more per token, though (batches of 2–4k tokens ran fastest on 2 cores, see
``docs/guides/runtime.md``): served on 2 cores, 20 MiniLM
passages of 60–120 words per request (~2.6k tokens) ran at a mean 95.5 docs/s in parts of 2 against
104.7 in one (four runs each, alternated), while 20 BERT-base documents of 300–500 tokens (~9k) ran
1.18× faster in two. So a call is planned in at most ⌊T / ``MIN_SHARE_TOKENS``⌋ parts: one for
those 20 short passages (the plan they had without parts), two for the long documents. The plan
depends on the call's own lengths and P only, never on the lanes that run it, so a run without
lanes (offline) computes bitwise the same batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from steadyrank.serve.runtime.lanes import forward_pool

#: a call is planned in parts only while each part keeps this many tokens (module docstring)
MIN_SHARE_TOKENS = 2048


@dataclass(frozen=True)
class Batch:
    """One padded forward batch: tensors on the target device and the input rows they hold."""

    rows: np.ndarray  # input indices, in batch order
    input_ids: torch.Tensor  # (b, L) int64
    attention_mask: torch.Tensor  # (b, L) int64, 1 = real token
    token_type_ids: torch.Tensor | None  # (b, L) int64, for pair encoders that use them
    source: int = 0  # which input of run_batched_many the rows belong to


def plan_batches(lengths: Sequence[int], batch_tokens: int, batch_size: int,
                 max_padding: float = 1.0, parts: int = 1) -> list[np.ndarray]:
    """Split indices into batches, longest sequences first, with rows ≤ batch_size,
    rows × max length ≤ batch_tokens and every row's length ≥ (1 − max_padding) × max length.
    A sequence longer than the budget gets a batch of its own. ``parts`` > 1 tightens both bounds
    so the batches split into that many equal shares, as many as keep ``MIN_SHARE_TOKENS`` tokens
    each (module docstring).
    """
    sizes = np.asarray(lengths, dtype=np.int64)
    parts = min(parts, max(1, int(sizes.sum()) // MIN_SHARE_TOKENS))
    target = 1  # batches the row bound aims at: a multiple of parts
    if parts > 1 and sizes.size > 1:
        target = parts * math.ceil(sizes.size / (parts * batch_size))
        batch_tokens = min(batch_tokens, math.ceil(int(sizes.sum()) / parts))
    order = np.argsort(-sizes, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < order.size:
        longest = max(int(sizes[order[start]]), 1)
        even = math.ceil((order.size - start) / max(1, target - len(batches)))  # the rest in equal batches
        rows = max(1, min(batch_size, even, batch_tokens // longest))
        window = sizes[order[start : start + rows]]
        rows = max(1, int(np.count_nonzero(window >= (1.0 - max_padding) * longest)))  # sorted: a prefix
        batches.append(order[start : start + rows])
        start += rows
    return batches


def pad(rows: Sequence[Sequence[int]], value: int, side: Literal["right", "left"]) -> torch.Tensor:
    """Stack integer rows into a (b, max_len) int64 tensor, padding with ``value`` on ``side``."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            span = slice(0, len(row)) if side == "right" else slice(width - len(row), width)
            out[i, span] = torch.as_tensor(row, dtype=torch.long)
    return out


def make_batch(
    rows: np.ndarray,
    input_ids: Sequence[Sequence[int]],
    token_type_ids: Sequence[Sequence[int]] | None,
    pad_id: int,
    padding_side: Literal["right", "left"],
    device: torch.device,
    source: int = 0,
) -> Batch:
    """The padded batch of input ``rows`` (indices into ``input_ids``) of input ``source``, on ``device``."""
    return Batch(
        rows=rows,
        input_ids=pad([input_ids[i] for i in rows], pad_id, padding_side).to(device),
        attention_mask=pad([[1] * len(input_ids[i]) for i in rows], 0, padding_side).to(device),
        token_type_ids=(
            pad([token_type_ids[i] for i in rows], 0, padding_side).to(device) if token_type_ids is not None else None
        ),
        source=source,
    )


Inputs = tuple[Sequence[Sequence[int]], Sequence[Sequence[int]] | None]  # (input_ids, token_type_ids)


def run_batched_many(
    inputs: Sequence[Inputs],
    *,
    forward: Callable[[Batch], torch.Tensor],
    batch_tokens: int,
    batch_size: int,
    max_padding: float = 1.0,
    parts: int = 1,
    pad_id: int,
    padding_side: Literal["right", "left"],
    device: torch.device,
    show_progress: bool = False,
    desc: str = "forward",
) -> list[torch.Tensor]:
    """For each input ``(input_ids, token_type_ids)``: run ``forward`` (under
    ``torch.inference_mode``) over its own budget-packed batches and return its rows in input
    order (on CPU).

    ``forward`` maps a :class:`Batch` (its ``source`` says which input it holds rows of) to a tensor
    whose first dimension is the batch rows. With
    forward lanes set (:mod:`serve.runtime.lanes`) the batches of an input with several run on
    the lanes; an input of one batch runs in the calling thread, before the others. The lanes take
    the batches of all inputs from one queue, so a lane that finishes one input's last batch starts
    on the next input's first instead of idling until its partner finishes. Rows of different inputs
    never share a batch and which threads run a batch depends only on its own input's plan, so each
    input's result is bitwise what it gets alone.
    """
    plans = [plan_batches([len(ids) for ids in ids_], batch_tokens, batch_size, max_padding, parts) for ids_, _ in inputs]
    if not all(plans):
        raise ValueError("run_batched_many needs at least one sequence per input")

    def run(k: int, rows: np.ndarray) -> torch.Tensor:
        with torch.inference_mode():  # thread-local: set here, in whichever thread runs the batch
            ids, types = inputs[k]
            return forward(make_batch(rows, ids, types, pad_id, padding_side, device, k)).cpu()

    pools = [forward_pool(len(plan)) for plan in plans]
    on_lanes = any(pool is not None for pool in pools)
    outs: dict[tuple[int, int], torch.Tensor | Callable[[], torch.Tensor]] = {}
    for k, plan in enumerate(plans):
        if pools[k] is None:  # with lanes: now, before they start (no oversubscription); else lazily
            for j, rows in enumerate(plan):
                outs[(k, j)] = run(k, rows) if on_lanes else partial(run, k, rows)
    for k, (pool, plan) in enumerate(zip(pools, plans, strict=True)):
        if pool is not None:
            outs.update({(k, j): pool.submit(run, k, rows).result for j, rows in enumerate(plan)})
    results = []
    with tqdm(total=sum(len(ids) for ids, _ in inputs), desc=desc, unit="seq", disable=not show_progress) as bar:
        for k, plan in enumerate(plans):
            result: torch.Tensor | None = None
            for j, rows in enumerate(plan):
                out = outs.pop((k, j))
                out = out() if callable(out) else out  # without lanes the batch runs here: the bar advances
                if result is None:
                    result = torch.empty((len(inputs[k][0]), *out.shape[1:]), dtype=out.dtype)
                result[torch.as_tensor(rows)] = out
                bar.update(rows.size)
            results.append(result)
    return results
