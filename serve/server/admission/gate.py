"""One ingress replica's admission state (:class:`Gate`: requests in flight, draining, each model
deployment's admitted work, refusal pacing) and what a request is admitted as (:class:`Work`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from steadyrank.serve.errors import OverloadedError
from steadyrank.serve.server.admission.pacing import RefusalPacer
from steadyrank.serve.server.admission.work_queue import WorkQueue
from steadyrank.serve.settings import AdmissionSettings, Settings

#: The model deployments whose queued work is admitted per request (:class:`WorkQueue`).
MODELS = ("reranker", "embedder")


@dataclass(frozen=True)
class Work:
    """What one request is admitted as: ``units`` of work at the model deployment ``model``."""

    model: str
    units: int


def search_work(settings: Settings) -> Work:
    """The model work a ``/v1/search`` is admitted as, known before its body is read: the primary
    reranker's ``routing.k_low`` candidates (every search reranks at least these; an escalation to
    up to ``k_high`` is counted in the rate when the search answers, from its ``meta.k``). When the
    primary reranker scores from the index's stored vectors (a bi-encoder with the embedder's own
    vectors, the embedded default) a search's only model work is its query's embedding: one unit
    at the embedder."""
    if settings.reranker_model.same_vectors(settings.embedder):
        return Work("embedder", 1)
    return Work("reranker", settings.routing_policy().k_low)


@dataclass
class Gate:
    """One ingress replica's admission state. ``in_flight`` counts scoring requests whose body has
    been read and whose response is not yet complete (a body still arriving holds no slot)."""

    pacer: RefusalPacer
    headroom: float
    in_flight: int = 0
    draining: bool = False
    work: dict[str, WorkQueue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for model in MODELS:
            self.work.setdefault(model, WorkQueue(headroom=self.headroom))

    @classmethod
    def from_settings(cls, admission: AdmissionSettings) -> Gate:
        """A fresh gate: pacing at ``admission.refusals_per_s``, work queues at ``admission.headroom``."""
        return cls(pacer=RefusalPacer(admission.refusals_per_s, admission.refusal_max_wait_s),
                   headroom=admission.headroom)

    def sized_work(self, model: str, body_bytes: int | None) -> Work:
        """The work a request to ``model`` with a body of ``body_bytes`` bytes is estimated as before
        the body is read (:meth:`WorkQueue.units_in`: low)."""
        return Work(model, self.work[model].units_in(body_bytes))

    def work_refusal(self, model: str, units: int, deadline_s: float) -> OverloadedError | None:
        """The 503 for a request of ``units`` at ``model`` with ``deadline_s`` seconds left that
        work-based admission refuses (:meth:`WorkQueue.refusal`), or None."""
        queue = self.work[model]
        retry_after = queue.refusal(units, deadline_s)
        if retry_after is None:
            return None
        return OverloadedError(f"server overloaded: the {model} has about {queue.predicted_wait(units):.0f} s of work "
                               f"queued, more than this request's deadline of {deadline_s:g} s allows; retry later",
                               retry_after_s=retry_after)
