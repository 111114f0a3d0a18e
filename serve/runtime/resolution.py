"""A served model section with an offline run's own choices over it, and the fields that decide its scores.

``steadyrank search``, ``clq sweep`` and ``precision-report`` start from the served settings' model
sections (``serve.cli.commands.served``) and change only what their flags or grid entries name:
:func:`overlay`. :func:`scoring_json` names what decides a model's scores (printed in their reports,
keyed in the CLQ sweep's caches).
"""

from __future__ import annotations

from typing import Any, Final

from steadyrank.serve.runtime.precision import precision_on_this_machine
from steadyrank.serve.runtime.settings import ModelSettings


class _Unset:
    """The type of :data:`UNSET`."""


#: ``path`` not given: the section's model (None is the bundled MiniLM).
UNSET: Final = _Unset()

#: The fields of a model section that decide its scores.
SCORE_FIELDS = frozenset({"path", "kind", "precision", "scoring", "max_length", "truncation_side", "backend",
                          "rescore_boundary_ties"})


def overlay(section: ModelSettings, *, path: str | None | _Unset = UNSET, precision: str | None = None,
            scoring: str | None = None, prompts: dict[str, str] | None = None) -> ModelSettings:
    """``section`` with the given fields over it (None / :data:`UNSET`: as in ``section``). A new
    ``path`` (None: the bundled MiniLM) drops the section's Hub ``revision`` and ``served_id``: they
    belonged to the model it replaces."""
    update: dict[str, Any] = {}
    if not isinstance(path, _Unset):
        update.update(path=path, revision=None, served_id=None)
    for key, value in (("precision", precision), ("scoring", scoring), ("prompts", prompts)):
        if value is not None:
            update[key] = value
    return ModelSettings.model_validate({**section.model_dump(), **update}) if update else section


def scoring_json(model: ModelSettings) -> dict[str, Any]:
    """The :data:`SCORE_FIELDS` of ``model`` and the precision ``auto`` runs in here (``precision_here``)."""
    return {**model.model_dump(include=set(SCORE_FIELDS)), "precision_here": precision_on_this_machine(model)}
