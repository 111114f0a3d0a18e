"""The ``admission`` section: what one request is let in to, and when it is refused instead
(docs/design/0008-admission.md): in-flight slots, work-based admission, refusal pacing and the
shadow traffic's priority on the model replicas.

Its fields were ``limits.max_in_flight``, ``limits.admission_headroom``, ``limits.refusals_per_s``,
``limits.refusal_max_wait_s`` and ``quality.shadow_*`` before; a settings mapping that still names
them is moved over, with a warning naming the new key (:func:`move_legacy_keys`)."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import Field

from steadyrank.serve.settings.base import Section

#: ``(old section, old key) → new key in admission`` of the settings this section took over.
LEGACY_KEYS = {
    ("limits", "max_in_flight"): "max_in_flight",
    ("limits", "admission_headroom"): "headroom",
    ("limits", "refusals_per_s"): "refusals_per_s",
    ("limits", "refusal_max_wait_s"): "refusal_max_wait_s",
    ("quality", "shadow_chunk_docs"): "shadow_chunk_docs",
    ("quality", "shadow_idle_s"): "shadow_idle_s",
    ("quality", "shadow_max_wait_s"): "shadow_max_wait_s",
}


class AdmissionSettings(Section):
    """Admission and backpressure: beyond these a request is refused at once (503 + Retry-After,
    before any compute), and shadow work waits for user work (docs/design/0008-admission.md). The
    old keys limits.max_in_flight, limits.admission_headroom, limits.refusals_per_s,
    limits.refusal_max_wait_s and quality.shadow_* are deprecated but still read, with a warning."""

    max_in_flight: int = Field(default=64, ge=1, description="scoring requests one ingress replica works on at once; "
                                                     "beyond, 503 + Retry-After at once, before any compute")
    headroom: float = Field(
        default=0.8, gt=0, le=100,
        description="work-based admission of rerank, embeddings and search: a request is refused at once (503 + "
                    "Retry-After) when its predicted wait (queued documents or texts / the model's measured rate; a "
                    "search counts routing.k_low documents) exceeds this fraction of its deadline; a large value "
                    "turns it off")
    refusals_per_s: float = Field(
        default=25.0, ge=0, description="overload 503s one ingress replica sends per second at most: a refusal beyond waits "
                                "(no CPU) for its turn, at most refusal_max_wait_s, so clients that retry at once "
                                "cannot turn refusals into the main load; 0 = answer every refusal at once")
    refusal_max_wait_s: float = Field(default=5.0, ge=0, description="longest a paced refusal waits; past it, answered at once")
    shadow_chunk_docs: int = Field(
        default=4, ge=1, description="documents per shadow forward pass on a reranker replica: the most forward-pass work "
                             "a user request can find ahead of it (see serve.server.admission.shadow)"
    )
    shadow_idle_s: float = Field(
        default=0.25, ge=0, description="a shadow chunk starts only after the replica had no user work for this long (s); "
                              "longer than the gap between the back-to-back requests of a busy client"
    )
    shadow_max_wait_s: float = Field(
        default=20.0, ge=0, description="a shadow chunk that waited this long runs anyway, so sustained load cannot starve "
                                "the evaluator (s)"
    )


def move_legacy_keys(data: Any) -> Any:
    """``data`` (a raw settings mapping) with every key of :data:`LEGACY_KEYS` moved into its
    ``admission`` section, each with a ``FutureWarning`` naming the new key. A key given both ways
    with different values is an error (with the same value, the old one is dropped). ``data`` itself
    is not changed: the sections touched are copies."""
    if not isinstance(data, dict) or not any(isinstance(data.get(old), dict) and key in data[old]
                                             for old, key in LEGACY_KEYS):
        return data
    data = dict(data)
    admission = data.get("admission")
    if admission is not None and not isinstance(admission, dict):
        return data  # the section's own validation names the problem
    admission = dict(admission or {})
    for (section, key), new in LEGACY_KEYS.items():
        old = data.get(section)
        if not isinstance(old, dict) or key not in old:
            continue
        old = data[section] = dict(old)
        value = old.pop(key)
        if new in admission and admission[new] != value:
            raise ValueError(f"{section}.{key} ({value!r}) and admission.{new} ({admission[new]!r}) are both set and "
                             f"differ: {section}.{key} is deprecated, keep only admission.{new}")
        admission[new] = value
        warnings.warn(f"settings: {section}.{key} is deprecated; use admission.{new} (the value is taken over)",
                      FutureWarning, stacklevel=2)
    data["admission"] = admission
    return data
