"""``Embedder``: the bi-encoder — query embeddings for search and ``/v1/embeddings``, batched across requests."""

from __future__ import annotations

from typing import Any

import numpy as np

from steadyrank.serve.runtime.prompts import PromptRole
from steadyrank.serve.server.admission.deadline import Ticket
from steadyrank.serve.server.admission.shadow import ShadowGate
from steadyrank.serve.server.calls import Deadline, EmbedOutcome
from steadyrank.serve.server.components.batcher import RequestBatcher
from steadyrank.serve.server.components.common import (
    admitted,
    apply_batch_config,
    model_executor,
    run_batch,
    set_compute_threads,
    shadow_turn,
)
from steadyrank.serve.settings import Settings, load_settings
from steadyrank.serve.telemetry import Recorder


class Embedder:
    """``embed(texts, count_tokens=False, role=None, prompt_name=None, instruction=None) ->``
    :class:`~serve.server.calls.EmbedOutcome` (float32 (n, dim) unit rows, tokens), each text after the prompt asked
    for (:meth:`~serve.runtime.prompts.EmbedPrompts.choose`)."""

    def __init__(self, settings: Settings | dict, hub: Any) -> None:
        from steadyrank.serve.runtime import load_embedder

        settings = load_settings(settings)
        options = settings.deployments.embedder
        set_compute_threads(options.torch_threads, options.forward_lanes)
        self.model = load_embedder(settings.embedder)
        self.executor = model_executor(settings.deployments.background_niceness)
        self._batch = RequestBatcher(self._run_batch)  # limits from user_config (reconfigure)
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)
        self.gate = ShadowGate(settings.admission.shadow_idle_s, settings.admission.shadow_max_wait_s)

    def reconfigure(self, config: dict[str, Any]) -> None:
        apply_batch_config(self._batch, config)

    async def info(self) -> dict[str, Any]:
        m = self.model
        return {"model": m.model_id, "dim": m.dim, "precision": m.precision,
                "precision_choice": m.precision_choice.facts(), "scoring": m.scoring,
                "max_length": m.max_length, "prompts": {"query": m.query_prompt, "document": m.document_prompt}}

    async def embed(self, texts: list[str], count_tokens: bool = False, deadline: Deadline | None = None,
                    shadow: bool = False, role: PromptRole | None = None, prompt_name: str | None = None,
                    instruction: str | None = None) -> EmbedOutcome:
        """An :class:`~serve.server.calls.EmbedOutcome`: float32 (n, dim) unit rows and, with
        ``count_tokens``, the tokens after truncation (the prompt's included). The prompt: ``role``'s
        (``query`` for searches), the one called ``prompt_name``, the query prompt with
        ``instruction``, else the model's default; one the model does not have is refused before any work (InvalidInputError).
        ``deadline``: dropped unembedded once it passed (``DeadlineExceeded``).
        ``shadow`` (a golden replay's or mirrored search's query): embedded only when user work
        leaves room (:class:`~serve.server.admission.shadow.ShadowGate`, as in the Reranker), outside the
        user batches; its vectors equal the user path's (one forward plan per request)."""
        prompt = self.model.prompts.choose(role, prompt_name, instruction)
        if not texts:
            return EmbedOutcome(np.zeros((0, self.model.dim), dtype=np.float32), 0 if count_tokens else None)
        job = (texts, bool(count_tokens), prompt)
        if shadow:
            return (await shadow_turn(self.gate, self.recorder, "embedder", self.executor, self._encode, [job]))[0]
        async with self.gate.user():
            return await admitted(self._batch, job, Ticket(deadline), self.recorder, "embedder")

    async def _run_batch(self, jobs: list[tuple[tuple[list[str], bool, str], Ticket]]) -> list[Any]:
        self.recorder.observe("steadyrank_batch_size", len(jobs), deployment="embedder")
        return await run_batch(self.executor, jobs, self._encode, self.recorder, "embedder")

    def _encode(self, jobs: list[tuple[list[str], bool, str]]) -> list[EmbedOutcome]:
        """One forward plan per job (each after its prompt), the jobs' batches sharing the forward
        lanes (as :meth:`Reranker._score_jobs`): a request's vectors never depend on what else was in flight."""
        vectors = self.model.encode_many([texts for texts, _, _ in jobs], [prompt for _, _, prompt in jobs])
        return [EmbedOutcome(v, self._tokens(texts, prompt) if count else None)
                for v, (texts, count, prompt) in zip(vectors, jobs, strict=True)]

    def _tokens(self, texts: list[str], prompt: str) -> int:
        prompted = [prompt + t for t in texts] if prompt else texts
        ids = self.model.backend.tokenizer(prompted, truncation=True, max_length=self.model.max_length)["input_ids"]
        return int(sum(len(x) for x in ids))
