"""Model names: the served ids, their aliases (settings ``served``) and the 404 for any other name;
with them, what a request may ask of each model (its prompt names, whether it takes an instruction),
which the served OpenAPI states (:mod:`.schema_limits`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from steadyrank.serve.errors import NotFoundError

Task = Literal["reranker", "embedder"]


@dataclass(frozen=True)
class ServedNames:
    """Accepted ``model`` values per task: the served id first, then the aliases."""

    reranker: tuple[str, ...]
    embedder: tuple[str, ...]
    embedder_dim: int
    matryoshka: bool
    embedder_prompt_names: tuple[str, ...] = ()  # the embedder's named prompts (``prompt_name``)
    embedder_instruction: bool = False  # the embedder's query prompt takes an ``instruction``
    reranker_instruction: bool = False  # the reranker takes an ``instruction`` (a causal LM, or such an embedder)

    @classmethod
    def from_settings(cls, settings: object) -> ServedNames:
        """Read the ids from the model files (no weights loaded) and the aliases from ``served``."""
        from steadyrank.serve.runtime.inspection import inspect_model, model_id
        from steadyrank.serve.server.default import embedder_identity

        served = settings.served  # type: ignore[attr-defined]
        embedder = embedder_identity(settings.embedder)  # type: ignore[attr-defined]
        prompts = inspect_model(settings.embedder).prompts  # type: ignore[attr-defined]
        reranker = inspect_model(settings.reranker_model)  # type: ignore[attr-defined]
        return cls(
            reranker=tuple(dict.fromkeys([model_id(reranker), *served.reranker.aliases])),
            embedder=tuple(dict.fromkeys([embedder.model_id, *served.embedder.aliases])),
            embedder_dim=embedder.dim,
            matryoshka=served.embedder.matryoshka,
            embedder_prompt_names=tuple(sorted(prompts.named)),
            embedder_instruction=prompts.instruction_template is not None,
            reranker_instruction=reranker.kind == "causal-lm" or (
                reranker.kind == "bi-encoder" and reranker.prompts.instruction_template is not None),
        )

    def names(self, task: Task) -> tuple[str, ...]:
        return self.reranker if task == "reranker" else self.embedder

    def resolve(self, task: Task, requested: str | None) -> str:
        """The served id for ``requested`` (None = the served model); :class:`NotFoundError` listing the
        accepted names for any other name."""
        names = self.names(task)
        if requested is None or requested in names:
            return names[0]
        listed = ", ".join(repr(n) for n in names)
        raise NotFoundError(f"model {requested!r} is not served here; this endpoint serves {listed}")
