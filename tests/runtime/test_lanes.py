"""Forward lanes: a call's batches run on the lane threads, at once, with the same results."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from steadyrank.serve.errors import InvalidInputError
from steadyrank.serve.runtime import ModelSettings, load_embedder, load_scorer
from steadyrank.serve.runtime.batching import run_batched_many
from steadyrank.serve.runtime.lanes import forward_pool, lane_shape, start_lanes, use_forward_lanes


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on 1 intra-op thread (the lanes' count in these tests); lanes off and threads back after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    use_forward_lanes(1, 1)
    torch.set_num_threads(before)


def test_batches_run_on_every_lane_at_once(one_thread: None) -> None:
    use_forward_lanes(2, 1)
    assert lane_shape() == (2, 1)
    both_running = threading.Barrier(2, timeout=10)  # a batch returns only once another runs beside it
    seen: list[tuple[int, int, bool]] = []

    def forward(batch):
        both_running.wait()
        seen.append((threading.get_ident(), torch.get_num_threads(), torch.is_inference_mode_enabled()))
        return batch.attention_mask.sum(dim=1, keepdim=True)

    out = run_batched_many([([[5] * n for n in (4, 1, 3, 2)], None)], forward=forward, batch_tokens=4, batch_size=1,
                           pad_id=0, padding_side="right", device=torch.device("cpu"))[0]
    assert out[:, 0].tolist() == [4, 1, 3, 2]  # input order, whichever lane ran which batch
    assert len({ident for ident, _, _ in seen}) == 2 and all(n == 1 and inference for _, n, inference in seen)
    assert threading.get_ident() not in {ident for ident, _, _ in seen}


def test_a_call_of_one_batch_runs_in_the_calling_thread_with_every_lanes_threads(one_thread: None) -> None:
    use_forward_lanes(2, 1)
    assert start_lanes()  # on this thread: it now has 2 lanes x 1 thread
    seen: list[tuple[int, int]] = []

    def forward(batch):
        seen.append((threading.get_ident(), torch.get_num_threads()))
        return batch.attention_mask.sum(dim=1, keepdim=True)

    out = run_batched_many([([[5] * n for n in (4, 3)], None)], forward=forward, batch_tokens=64, batch_size=8,
                           max_padding=0.5, pad_id=0, padding_side="right", device=torch.device("cpu"))[0]
    assert out[:, 0].tolist() == [4, 3]
    assert seen == [(threading.get_ident(), 2)]


def test_start_lanes_starts_each_lane_thread_once(one_thread: None) -> None:
    use_forward_lanes(1, 1)
    assert start_lanes() == []  # no lanes
    use_forward_lanes(3, 1)
    tids = start_lanes()
    assert len(set(tids)) == 3 and threading.get_native_id() not in tids
    assert sorted(start_lanes()) == sorted(tids)  # the same threads, not new ones
    use_forward_lanes(1, 1)
    assert forward_pool(1) is None and forward_pool(3) is None and lane_shape() == (1, 1)


def test_lanes_refuse_zero() -> None:
    with pytest.raises(ValueError, match="must be ≥ 1"):
        use_forward_lanes(0, 1)


def test_scores_on_lanes_bitwise_equal_to_the_calling_thread(one_thread: None, cross_encoder_1: Path) -> None:
    """Each batch's rows and padding do not depend on the lanes, and every lane has the same
    thread count as the caller here: the scores are the same bits."""
    scorer = load_scorer(ModelSettings(path=str(cross_encoder_1), batch_size=2))
    pairs = [("query", " ".join(["word"] * n)) for n in (1, 9, 4, 30, 2, 17, 5)]
    alone = scorer.score(pairs).logits
    use_forward_lanes(2, 1)
    assert np.array_equal(scorer.score(pairs).logits, alone)


def test_inputs_of_one_call_share_the_lanes_and_keep_their_own_results(one_thread: None) -> None:
    """run_batched_many: inputs of one batch run first in the calling thread; the batches of the
    others are all queued on the lanes at once; each input comes back whole, in its own order."""
    use_forward_lanes(2, 1)
    start_lanes()  # this thread: 2 threads, for inputs of one batch
    order: list[tuple[int, int]] = []  # (first token = input id, thread count) in the order run

    def forward(batch):
        order.append((int(batch.input_ids[0, 0]), torch.get_num_threads()))
        return batch.attention_mask.sum(dim=1, keepdim=True) + 100 * batch.input_ids[:, :1]

    inputs = [([[k] * n for n in lengths], None) for k, lengths in enumerate([(3, 1, 2), (4,), (2, 5), (1,)])]
    outs = run_batched_many(inputs, forward=forward, batch_tokens=4, batch_size=1, pad_id=0,
                            padding_side="right", device=torch.device("cpu"))
    assert [out[:, 0].tolist() for out in outs] == [[3, 1, 2], [104], [202, 205], [301]]
    assert order[:2] == [(1, 2), (3, 2)]  # the one-batch inputs, in the caller with every lane's threads
    assert sorted(order[2:]) == [(0, 1)] * 3 + [(2, 1)] * 2  # the rest on the lanes
    with pytest.raises(ValueError, match="at least one sequence"):
        run_batched_many([([[1]], None), ([], None)], forward=forward, batch_tokens=4, batch_size=1, pad_id=0,
                         padding_side="right", device=torch.device("cpu"))


def test_score_many_is_bitwise_score_of_each_list(one_thread: None, cross_encoder_1: Path) -> None:
    """A request scored in a call with others gets the bits it gets alone (the server batches
    concurrent requests this way)."""
    scorer = load_scorer(ModelSettings(path=str(cross_encoder_1), batch_size=2))
    lists = [[(f"query {k}", " ".join(["word"] * n)) for n in lengths]
             for k, lengths in enumerate([(1, 9, 4, 30, 2), (7,), (17, 5, 3), (2, 2)])]
    use_forward_lanes(2, 1)
    start_lanes()
    alone = [scorer.score(pairs) for pairs in lists]
    together = scorer.score_many(lists)
    assert len(together) == len(lists)
    for a, b in zip(alone, together, strict=True):
        assert np.array_equal(a.logits, b.logits) and np.array_equal(a.keys, b.keys)
        assert np.array_equal(a.truncated, b.truncated)
    with pytest.raises(InvalidInputError, match="no .query, document. pairs"):
        scorer.score_many([lists[0], []])


def test_encode_many_is_bitwise_encode_of_each_list(one_thread: None) -> None:
    """The embedder's dynamic batches: each request's vectors are the bits it gets alone; an empty
    list gets no rows."""
    embedder = load_embedder(ModelSettings(batch_size=2))
    lists = [["a short text", "a somewhat longer text about something else", "x", "one more", "and another"],
             ["alone"], [], ["two texts", "of similar length"]]
    use_forward_lanes(2, 1)
    start_lanes()
    alone = [embedder.encode(texts) for texts in lists]
    together = embedder.encode_many(lists)
    assert [v.shape for v in together] == [(5, embedder.dim), (1, embedder.dim), (0, embedder.dim), (2, embedder.dim)]
    assert all(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))


def test_without_lanes_each_batch_runs_as_the_progress_bar_reaches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline work (an index build) runs without lanes: its progress bar must advance batch by
    batch, not jump to the end after every batch ran."""
    import steadyrank.serve.runtime.batching as batching

    events: list[str] = []

    class Bar:
        def __init__(self, **_: object) -> None: ...
        def __enter__(self) -> Bar: return self
        def __exit__(self, *_: object) -> None: ...
        def update(self, n: int) -> None: events.append(f"update {n}")

    def forward(batch):
        events.append("forward")
        return batch.attention_mask.sum(dim=1, keepdim=True)

    monkeypatch.setattr(batching, "tqdm", Bar)
    use_forward_lanes(1, torch.get_num_threads())
    run_batched_many([([[5] * n for n in (3, 2, 1)], None)], forward=forward, batch_tokens=4, batch_size=1,
                     pad_id=0, padding_side="right", device=torch.device("cpu"), show_progress=True)
    assert events == ["forward", "update 1"] * 3


def test_plan_in_parts_does_not_depend_on_the_lanes(one_thread: None) -> None:
    """The scorer plans with the model's batch_parts, whatever lanes run the call: a call's batches
    (so its scores) are the same in a server with two lanes and offline without lanes."""
    seen: list[list[int]] = []

    def forward(batch: object) -> torch.Tensor:
        rows = batch.rows  # type: ignore[attr-defined]
        seen.append(sorted(rows.tolist()))
        return torch.zeros(len(rows))

    seqs = [[5] * n for n in (900, 300, 700, 700, 200, 800, 600, 100, 400, 500)]
    plans = []
    for shape in ((1, 1), (2, 1)):
        use_forward_lanes(*shape)
        seen.clear()
        run_batched_many([(seqs, None)], forward=forward, batch_tokens=8192, batch_size=8, parts=2, pad_id=0,
                         padding_side="right", device=torch.device("cpu"))
        plans.append(sorted(seen))
    assert plans[0] == plans[1] and len(plans[0]) >= 2
