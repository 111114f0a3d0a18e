"""Settings from a file, a mapping or the environment: YAML/JSON reading, paths resolved against the
file's folder, validation errors as one ``field.path: problem`` line each, and the check that every
file the settings name exists."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from steadyrank.retrieval.layout import holds_index
from steadyrank.serve.runtime.hub import is_hub_id
from steadyrank.serve.settings.base import SettingsError
from steadyrank.serve.settings.root import Settings

ENV_SETTINGS = "STEADYRANK_SETTINGS"

_MODEL_SECTIONS = ("embedder", "reranker", "canary")
_PATH_FIELDS = (
    ("cache_dir",), ("embedder", "path"), ("reranker", "path"), ("canary", "path"),
    ("index", "path"), ("index", "corpus"), ("routing", "file"), ("quality", "golden"), ("auth", "keys_file"),
)


def _resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make the path fields of raw settings absolute relative to ``base`` (the settings file's folder).
    A model ``path`` that is no folder under ``base`` but has a Hub id's shape (``org/name``) stays
    as it is: it is resolved on the Hub (:mod:`serve.server.model_refs`)."""
    for keys in _PATH_FIELDS:
        node: Any = data
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(keys[-1]), str):
            value = Path(node[keys[-1]]).expanduser()
            hub_id = keys[-1] == "path" and keys[0] in _MODEL_SECTIONS and is_hub_id(node[keys[-1]])
            if not value.is_absolute() and str(value) != "" and not (hub_id and not (base / value).is_dir()):
                node[keys[-1]] = str((base / value).resolve())
    return data


def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        lines.append(f"settings {source}: {loc}: {message}")
    return "\n".join(lines)


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a YAML/JSON settings file, paths resolved against its folder."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise SettingsError(f"settings {file}: no such file")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SettingsError(f"settings {file}: not valid YAML/JSON: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsError(f"settings {file}: expected a mapping at the top level, got {type(data).__name__}")
    data = data.get("steadyrank", data) if set(data) == {"steadyrank"} else data
    return _resolve_paths(data, file.resolve().parent)


def load_settings(source: str | Path | dict[str, Any] | Settings | None = None) -> Settings:
    """Settings from a file path, a mapping, a :class:`Settings`, or None (``$STEADYRANK_SETTINGS`` if
    set, else the embedded default). Raises :class:`SettingsError` naming every bad field."""
    if isinstance(source, Settings):
        return source
    if source is None and os.environ.get(ENV_SETTINGS):
        source = os.environ[ENV_SETTINGS]
    if source is None:
        data, label = {}, "(embedded default)"
    elif isinstance(source, dict):
        data, label = _resolve_paths(dict(source), Path.cwd()), "(mapping)"
    else:
        data, label = read_settings_file(source), str(source)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(format_validation_error(exc, label)) from None


def _calibration_problems(settings: Settings) -> list[str]:
    """A reranker's ``score_calibration`` that is missing, not a calibration file, or fitted on
    another model id (unless ``score_calibration_mismatch: flag``): one problem line each."""
    from steadyrank.serve.runtime.inspection import inspect_model, model_id
    from steadyrank.serve.runtime.score_calibration import served_calibration

    reranker = ("reranker", settings.reranker) if settings.reranker is not None else ("embedder", settings.embedder)
    problems = []
    for field, model in (reranker, ("canary", settings.canary)):
        if model is None or model.score_calibration is None:
            continue
        if model.path is not None and not Path(model.path).expanduser().is_dir():
            continue  # reported as the missing model directory
        try:
            served_calibration(model, model_id(inspect_model(model)))
        except (ValueError, FileNotFoundError) as exc:
            problems.append(f"{field}.score_calibration: {exc}")
    return problems


def check_files(settings: Settings) -> None:
    """Check that every file the settings name exists (errors name the field); cheap, no model loads."""
    problems = []
    for field, model in (("embedder", settings.embedder), ("reranker", settings.reranker), ("canary", settings.canary)):
        if model is not None and model.path is not None and not Path(model.path).expanduser().is_dir():
            problems.append(f"{field}.path: no model directory at {model.path}")
    problems += _calibration_problems(settings)
    index = settings.index
    if index.corpus is not None and not Path(index.corpus).expanduser().exists():
        problems.append(f"index.corpus: no such file or folder: {index.corpus}")
    if index.path is not None and index.corpus is None and not holds_index(Path(index.path).expanduser()):
        problems.append(
            f"index.path: no index at {index.path} (build one with `steadyrank index build`, "
            "or set index.corpus to build it on first start)"
        )
    quality = settings.quality
    if quality.enabled and quality.golden is not None and not Path(quality.golden).expanduser().exists():
        problems.append(f"quality.golden: no such file or folder: {quality.golden}")
    live = quality.live_judging
    if quality.enabled and live.enabled and live.judge is not None and not Path(live.judge).expanduser().is_file():
        problems.append(f"quality.live_judging.judge: no judge config file at {live.judge}")
    if problems:
        raise SettingsError("\n".join(f"settings: {p}" for p in problems))
