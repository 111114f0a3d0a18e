"""Model references of the settings made local before anything starts: every ``path`` of
``embedder``, ``reranker`` and ``canary`` that is a Hub id is downloaded (or found in the Hub cache)
by :mod:`serve.runtime.hub`, and the section then names the snapshot folder, with the id as its
``served_id`` (the HTTP routes serve the model under the id, aliases kept) and the commit as its
``revision``. Called once, by :func:`serve.server.hosting.builder.resolve_settings`, where the application is
built; replicas get the resolved settings."""

from __future__ import annotations

from steadyrank.serve.errors import ModelLoadError
from steadyrank.serve.runtime import hub
from steadyrank.serve.settings import Settings, SettingsError

MODEL_FIELDS = ("embedder", "reranker", "canary")


def resolve_model_refs(settings: Settings) -> Settings:
    """``settings`` with every model reference a local folder (see the module docstring); a failure
    is a :class:`SettingsError` naming the field and what to do."""
    updates = {}
    for field in MODEL_FIELDS:
        model = getattr(settings, field)
        if model is None or model.path is None:
            continue
        try:
            found = hub.resolve(model.path, model.revision)
        except ModelLoadError as exc:
            raise SettingsError(f"settings: {field}.path: {exc}") from None
        updates[field] = model.model_copy(update={
            "path": str(found.path),
            "served_id": model.served_id or found.hub_id,
            "revision": found.commit,
        })
    return settings.model_copy(update=updates) if updates else settings
