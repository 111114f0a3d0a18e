"""Command-line flags of ``steadyrank serve`` laid over the raw settings mapping, before validation:
a flag wins over the settings file, and every field it does not name keeps the file's value (or the
default). The result is validated like any settings file, so a flag's error names its field."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

#: The per-model setting ``--dtype`` sets (the forward dtype of the weights).
DTYPE_FIELD = "precision"


@dataclass(frozen=True)
class ServeFlags:
    """The settings-bearing flags of ``steadyrank serve`` (None = not given)."""

    reranker: str | None = None
    embedder: str | None = None
    dtype: str | None = None
    device: str | None = None
    replicas: int | None = None
    api_key_file: str | None = None
    host: str | None = None
    port: int | None = None

    def given(self) -> bool:
        return any(value is not None for value in vars(self).values())


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    section = data.get(name)
    data[name] = dict(section) if isinstance(section, dict) else {}
    return data[name]


def apply_flags(raw: dict[str, Any], flags: ServeFlags) -> tuple[dict[str, Any], list[str]]:
    """``raw`` (a settings mapping) with ``flags`` applied, and notes to print about what they changed.

    - ``--reranker`` / ``--embedder``: that section's ``path`` (a folder or a Hub id); the section's
      ``revision`` and ``served_id`` belonged to the model it replaces and are dropped;
    - ``--dtype`` / ``--device``: every model section that runs, embedder and reranker (the canary
      keeps its own);
    - ``--replicas N``: replicas of the reranker and embedder deployments; the colocated layout runs
      one replica holding everything, so N > 1 switches ``deployments.layout`` to ``split`` (noted);
    - ``--api-key-file``: ``auth.keys_file``; ``--host`` / ``--port``: ``http.host`` / ``http.port``.
    """
    data = copy.deepcopy(raw)
    notes: list[str] = []
    for name, reference in (("reranker", flags.reranker), ("embedder", flags.embedder)):
        if reference is not None:
            section = _section(data, name)
            for stale in ("revision", "served_id"):
                section.pop(stale, None)
            section["path"] = reference
    for field, value in ((DTYPE_FIELD, flags.dtype), ("device", flags.device)):
        if value is not None:
            for name in ("embedder", "reranker"):
                if name == "embedder" or data.get("reranker") is not None:
                    _section(data, name)[field] = value
    if flags.replicas is not None:
        deployments = _section(data, "deployments")
        if flags.replicas > 1 and deployments.get("layout", "colocated") == "colocated":
            deployments["layout"] = "split"
            notes.append(f"--replicas {flags.replicas}: deployments.layout is split (the colocated layout runs one "
                         "replica holding every component)")
        for name in ("reranker", "embedder"):
            options = _section(deployments, name)
            if options.get("autoscaling") is not None:
                raise ValueError(f"--replicas conflicts with deployments.{name}.autoscaling in the settings: remove one")
            options["num_replicas"] = flags.replicas
    if flags.api_key_file is not None:
        _section(data, "auth")["keys_file"] = flags.api_key_file
    for field, value in (("host", flags.host), ("port", flags.port)):
        if value is not None:
            _section(data, "http")[field] = value
    return data, notes
