"""Scorers: (query, document) pairs → FP32 scores, raw logits, rankings with tie facts.

Every kind is a :class:`Scorer`:

- :class:`PairScorer` — cross-encoders (1 logit → sigmoid, 2 logits → softmax[:, 1]) and causal-LM
  yes/no rerankers (softmax over ``[z_no, z_yes]``), on the transformers or the vLLM backend;
- :class:`BiEncoderScorer` — a bi-encoder: score = dot of the normalised query and document
  embeddings (FP32 under HPS); its "logits" are those dot products.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from steadyrank.retrieval.ranking import Cutoff, rank
from steadyrank.serve.errors import InvalidInputError, check_rerank_args
from steadyrank.serve.runtime import hps
from steadyrank.serve.runtime.chunking import InputRoom
from steadyrank.serve.runtime.embedder import Embedder
from steadyrank.serve.runtime.inspection import ModelSpec
from steadyrank.serve.runtime.precision import resolve
from steadyrank.serve.runtime.precision_calibration import ErrorBound
from steadyrank.serve.runtime.prompts import fill
from steadyrank.serve.runtime.settings import ModelSettings, Scoring


@dataclass(frozen=True)
class Scored:
    """Per-pair results: φ output, upcast raw logits, rank keys (see ``hps.rank_keys``), truncation."""

    scores: np.ndarray  # float32 (n,)
    logits: np.ndarray  # float32 (n, c)
    keys: np.ndarray  # float32 (n,)
    truncated: np.ndarray  # bool (n,)


@dataclass(frozen=True)
class RerankOutput:
    """One reranked request.

    ``scores`` float32 (n,) and ``logits`` float32 (n, c) are in input order. ``order`` lists input
    indices by rank key descending, ties by input index — except a tie group straddling ``top_n``
    that boundary re-scoring settled with FP32 forward scores. ``tie_groups`` are the groups (≥ 2) of
    exactly equal rank keys, in rank order; ``tie_at_cutoff`` says one still straddles ``top_n``;
    ``rescored`` counts the tie's candidates re-run in FP32; ``near_rescored`` the other candidates
    re-run to certify the cutoff; ``certified``: the top ``top_n`` set is FP32's (None: not asked).
    """

    scores: np.ndarray
    logits: np.ndarray
    truncated: np.ndarray
    order: np.ndarray
    tie_groups: list[list[int]]
    tie_at_cutoff: bool
    rescored: int
    near_rescored: int = 0
    certified: bool | None = None


class PairBackend(Protocol):
    """What a pair scorer needs from a backend: raw logits in the model dtype and truncation flags
    (a causal LM's prompt with the given instruction, None: the settings')."""

    def pair_logits(
        self, pairs: Sequence[tuple[str, str]], show_progress: bool = False, instruction: str | None = None
    ) -> tuple[torch.Tensor, np.ndarray]: ...

    def pair_logits_many(
        self, pair_lists: Sequence[Sequence[tuple[str, str]]], show_progress: bool = False,
        instructions: Sequence[str | None] | None = None,
    ) -> list[tuple[torch.Tensor, np.ndarray]]: ...


def _check_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    items = list(pairs)
    for i, pair in enumerate(items):
        if len(pair) != 2 or not all(isinstance(t, str) for t in pair):
            raise InvalidInputError(f"pairs[{i}] must be a (query, document) pair of strings")
    return items


class Scorer(ABC):
    """A loaded scoring model. Subclasses implement :meth:`_score`; ranking logic lives here.

    ``instruction`` (every scoring call): a request's task instruction, put into a causal-LM
    reranker's prompt or into an instruction-tuned bi-encoder's query prompt; None is the model's
    own. A model that takes none refuses one (:meth:`check_instruction`), never drops it.
    """

    kind: str

    def __init__(self, spec: ModelSpec, settings: ModelSettings, model_id: str) -> None:
        self.spec = spec
        self.settings, self.precision_choice = resolve(settings)  # precision "auto" → what runs here
        self.model_id = model_id
        self.kind = spec.kind
        self.precision = self.settings.precision
        self.scoring: Scoring = settings.scoring
        self._fp32: Scorer | None = None
        #: certified cutoffs (:func:`serve.runtime.calibrated.certify`): the margin and re-score cap, and
        #: the measured error bound it came from (None where ``score_error_bound`` set it or none is in force)
        self.cutoff: Cutoff | None = None
        self.error_bound: ErrorBound | None = None

    @abstractmethod
    def _score(self, pairs: list[tuple[str, str]], instruction: str | None = None) -> Scored:
        """Score validated, non-empty pairs."""

    def check_instruction(self, instruction: str | None) -> None:
        """Refuse an instruction this model cannot take (InvalidInputError); None always passes."""
        if instruction is not None and self.kind == "cross-encoder":
            raise InvalidInputError(f"model {self.model_id!r} is a cross-encoder: it takes no instruction "
                                    "(instructions go to causal-LM rerankers and instruction-tuned embedders)")

    def score(self, pairs: Sequence[tuple[str, str]], instruction: str | None = None) -> Scored:
        """All per-pair results for ``pairs`` (the batching entry point of the server)."""
        items = _check_pairs(pairs)
        if not items:
            raise InvalidInputError("no (query, document) pairs to score")
        self.check_instruction(instruction)
        return self._score(items, instruction)

    def score_many(self, pair_lists: Sequence[Sequence[tuple[str, str]]],
                   instructions: Sequence[str | None] | None = None) -> list[Scored]:
        """:meth:`score` of each list (``instructions[k]`` for list k), computed together where the
        model allows (a cross-encoder's forward batches of all lists share the forward lanes); each
        list's result is bitwise what :meth:`score` gives it alone."""
        checked = [_check_pairs(pairs) for pairs in pair_lists]
        if not all(checked):
            raise InvalidInputError("no (query, document) pairs to score")
        chosen: list[str | None] = list(instructions) if instructions is not None else [None] * len(checked)
        for instruction in chosen:
            self.check_instruction(instruction)
        return self._score_many(checked, chosen)

    def _score_many(self, pair_lists: list[list[tuple[str, str]]], instructions: list[str | None]) -> list[Scored]:
        return [self._score(pairs, instruction) for pairs, instruction in zip(pair_lists, instructions, strict=True)]

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(scores float32 (n,), logits float32 (n, c), truncated bool (n,))`` for ``pairs``."""
        scored = self.score(pairs)
        return scored.scores, scored.logits, scored.truncated

    def fp32_twin(self) -> Scorer:
        """The same model loaded again from disk with FP32 weights (lazily, once)."""
        if self._fp32 is None:
            settings = self.settings.model_copy(update={"precision": "fp32", "rescore_boundary_ties": False})
            self._fp32 = type(self)(self.spec, settings, self.model_id)
        return self._fp32

    @property
    def rescores_boundary_ties(self) -> bool:
        """A tie straddling ``top_n`` is settled by an FP32 forward pass (HPS below FP32)."""
        return self.settings.rescores_boundary_ties

    def fp32_keys(self, pairs: Sequence[tuple[str, str]], instruction: str | None = None) -> np.ndarray:
        """Rank keys of ``pairs`` from the FP32 twin (boundary re-scoring)."""
        return self.fp32_twin().score(pairs, instruction).keys

    @abstractmethod
    def input_room(self) -> InputRoom:
        """What one input of this model holds besides a document (chunked reranking's chunk size)."""

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None,
               instruction: str | None = None) -> RerankOutput:
        """Score ``documents`` against ``query`` and rank them (:func:`retrieval.ranking.rank`: rank
        keys descending, ties by input index; with ``rescores_boundary_ties`` a tie group straddling
        ``top_n`` is re-run in FP32 and ordered by those keys). The arguments are checked once, here
        (:func:`~serve.errors.check_rerank_args`, then the instruction), before any forward pass.
        """
        docs = check_rerank_args(query, documents, top_n)
        self.check_instruction(instruction)
        scored = self._score([(query, d) for d in docs], instruction)

        def rescore(indices: np.ndarray) -> np.ndarray:  # pairs checked above: not again
            return self.fp32_twin()._score([(query, docs[i]) for i in indices], instruction).keys

        ranking = rank(scored.keys, top_n, rescore if self.rescores_boundary_ties else None, self.cutoff)
        return RerankOutput(
            scores=scored.scores,
            logits=scored.logits,
            truncated=scored.truncated,
            order=ranking.order,
            tie_groups=[g.tolist() for g in ranking.tie_groups],
            tie_at_cutoff=ranking.tie_at_cutoff,
            rescored=ranking.rescored,
            near_rescored=ranking.near_rescored,
            certified=ranking.certified,
        )


class PairScorer(Scorer):
    """Cross-encoder or causal-LM reranker: one forward pass per pair, φ on its logits."""

    def __init__(self, spec: ModelSpec, settings: ModelSettings, model_id: str) -> None:
        super().__init__(spec, settings, model_id)
        if settings.backend == "vllm":
            from steadyrank.serve.runtime.vllm_backend import VllmBackend

            self.backend: PairBackend = VllmBackend(spec, self.settings)
        else:
            from steadyrank.serve.runtime.transformers_backend import TransformersBackend

            self.backend = TransformersBackend(spec, self.settings)

    def _score(self, pairs: list[tuple[str, str]], instruction: str | None = None) -> Scored:
        return self._score_many([pairs], [instruction])[0]

    def input_room(self) -> InputRoom:
        tokenizer: Any = getattr(self.backend, "tokenizer")  # noqa: B009 (both backends have one; the Protocol does not say)
        max_length = int(getattr(self.backend, "max_length", self.settings.max_length))
        if self.kind == "causal-lm":
            values = {"instruction": self.settings.instruction, "query": ""}
            head, tail = self.settings.prompt_template.split("{document}")
            reserve = len(tokenizer(fill(head, values) + fill(tail, values), add_special_tokens=False)["input_ids"])
        else:
            reserve = int(tokenizer.num_special_tokens_to_add(pair=True))
        return InputRoom(max_length, reserve, True)

    def _score_many(self, pair_lists: list[list[tuple[str, str]]], instructions: list[str | None]) -> list[Scored]:
        return [
            Scored(
                scores=hps.logit_scores(raw, self.scoring),
                logits=raw.float().numpy(),
                keys=hps.rank_keys(raw, self.scoring),
                truncated=truncated,
            )
            for raw, truncated in self.backend.pair_logits_many(pair_lists, instructions=instructions)
        ]


class BiEncoderScorer(Scorer):
    """Bi-encoder as a reranker: each distinct query and document is encoded once per call, the
    queries after the query prompt (a request's instruction put into it), the documents after the
    document prompt."""

    def __init__(self, spec: ModelSpec, settings: ModelSettings, model_id: str) -> None:
        super().__init__(spec, settings, model_id)
        self.embedder = Embedder(spec, settings, model_id)

    def check_instruction(self, instruction: str | None) -> None:
        if instruction is not None:
            self.embedder.prompts.for_instruction(instruction)  # refuses when the model takes none

    def input_room(self) -> InputRoom:
        tokenizer: Any = self.embedder.backend.tokenizer
        reserve = len(tokenizer(self.embedder.prompts.document, add_special_tokens=True)["input_ids"])
        return InputRoom(int(self.embedder.max_length), reserve, False)

    def _score(self, pairs: list[tuple[str, str]], instruction: str | None = None) -> Scored:
        prompts = self.embedder.prompts
        queries = list(dict.fromkeys(q for q, _ in pairs))
        docs = list(dict.fromkeys(d for _, d in pairs))
        query_prompt = prompts.query if instruction is None else prompts.for_instruction(instruction)
        (q_pooled, _), (d_pooled, truncated) = self.embedder.pooled_many([queries, docs],
                                                                           [query_prompt, prompts.document])
        q_row = {t: i for i, t in enumerate(queries)}
        d_row = {t: i for i, t in enumerate(docs)}
        d_rows = [d_row[d] for _, d in pairs]
        scores = hps.dot_scores(q_pooled[[q_row[q] for q, _ in pairs]], d_pooled[d_rows], self.scoring)
        return Scored(scores, scores[:, None].copy(), scores, truncated[d_rows])
