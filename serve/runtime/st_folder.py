"""A sentence-transformers folder read from its JSON files (no torch): the module pipeline, the
pooling, Dense layers after it, and the saved prompts.

Accepted pipelines (``modules.json``, module types by their class name, any package path, so the
folders of every sentence-transformers version read alike): ``Transformer`` (the folder itself) →
``Pooling`` → any number of ``Dense`` → optionally ``Normalize``. The embedding is always
L2-normalised at the end (cosine), so a ``Normalize`` module changes nothing.

The pooling config in both formats sentence-transformers writes:

- up to 4.x: one true flag among ``pooling_mode_{cls_token, mean_tokens, max_tokens,
  mean_sqrt_len_tokens, weightedmean_tokens, lasttoken}``;
- 5.x and later: ``pooling_mode`` (one name, or a list of one), and ``include_prompt`` (false: the
  prompt's tokens are left out of the pooling, INSTRUCTOR-style).

``config_sentence_transformers.json`` holds ``prompts`` and ``default_prompt_name``
(:class:`serve.runtime.prompts.EmbedPrompts`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from steadyrank.serve.errors import ModelLoadError, UnsupportedModelError

Pooling = Literal["mean", "cls", "max", "lasttoken", "weightedmean", "mean_sqrt_len_tokens"]
POOLING_MODES: tuple[Pooling, ...] = get_args(Pooling)

_LEGACY_POOLING_KEYS: dict[str, Pooling] = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
}
#: torch.nn activation classes a Dense module may name (``activation_function``)
DENSE_ACTIVATIONS = ("Identity", "Tanh", "ReLU", "GELU", "Sigmoid", "SiLU")
_PIPELINE = "Transformer → Pooling → Dense (any number) → Normalize (optional)"


@dataclass(frozen=True)
class DenseLayer:
    """One sentence-transformers ``Dense`` module: ``y = activation(W x + b)``, plus ``x`` (or ``R x``
    when the widths differ) with ``use_residual``; weights in ``folder``."""

    folder: Path
    in_features: int
    out_features: int
    bias: bool
    activation: str  # a name of DENSE_ACTIVATIONS
    residual: bool = False


@dataclass(frozen=True)
class StFolder:
    """What a sentence-transformers folder declares."""

    pooling: Pooling
    include_prompt: bool = True
    dense: tuple[DenseLayer, ...] = ()
    max_seq_length: int | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None


def head_width(layers: Sequence[DenseLayer], hidden_size: int) -> int:
    """The embedding's dimension: the last Dense layer's output, else the hidden size."""
    return layers[-1].out_features if layers else hidden_size


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc


def _pooling_mode(path: Path, config: dict[str, Any]) -> Pooling:
    modes: list[Any] = []
    if "pooling_mode" in config:
        declared = config["pooling_mode"]
        modes = list(declared) if isinstance(declared, list) else [declared]
    modes += [mode for key, mode in _LEGACY_POOLING_KEYS.items() if config.get(key) is True]
    unknown = [k for k, v in config.items() if k.startswith("pooling_mode_") and v and k not in _LEGACY_POOLING_KEYS]
    if len(modes) != 1 or unknown or modes[0] not in POOLING_MODES:
        raise UnsupportedModelError(
            f"{path}: pooling config {config} is not supported (exactly one pooling mode of {list(POOLING_MODES)})"
        )
    return modes[0]


def _dense(path: Path, folder: Path) -> DenseLayer:
    config = read_json(folder / "config.json")
    module, _, name = str(config.get("activation_function", "torch.nn.modules.activation.Tanh")).rpartition(".")
    if not module.startswith("torch.nn") or name not in DENSE_ACTIVATIONS:
        raise UnsupportedModelError(f"{path}: Dense activation {config.get('activation_function')!r} is not supported "
                                    f"(one of torch.nn's {list(DENSE_ACTIVATIONS)})")
    try:
        return DenseLayer(folder, int(config["in_features"]), int(config["out_features"]), bool(config.get("bias", True)),
                          name, bool(config.get("use_residual", False)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelLoadError(f"{folder / 'config.json'}: not a Dense config ({exc})") from exc


def read_st_folder(path: Path) -> StFolder | None:
    """The sentence-transformers pipeline of ``path``, or None when it has no ``modules.json`` with a
    Pooling module. Raises UnsupportedModelError for a pipeline other than the module docstring's."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    modules = read_json(modules_file)
    names = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if "Pooling" not in names:
        return None
    body = names[2:]
    while body and body[0] == "Dense":
        body = body[1:]
    if names[:2] != ["Transformer", "Pooling"] or body not in ([], ["Normalize"]):
        raise UnsupportedModelError(f"{path}: sentence-transformers modules {names} are not supported ({_PIPELINE})")
    if str(modules[0].get("path", "")) not in ("", "."):
        raise UnsupportedModelError(f"{path}: the Transformer module lives in {modules[0]['path']!r}; "
                                    "only folders with the transformer at their root are supported")
    pooling_config = read_json(path / modules[1].get("path", "") / "config.json")
    dense = tuple(_dense(path, path / m["path"]) for m, name in zip(modules, names, strict=True) if name == "Dense")
    st_config = path / "sentence_bert_config.json"
    max_seq = read_json(st_config).get("max_seq_length") if st_config.is_file() else None
    prompts_file = path / "config_sentence_transformers.json"
    saved = read_json(prompts_file) if prompts_file.is_file() else {}
    prompts = {str(k): str(v) for k, v in (saved.get("prompts") or {}).items()}
    default = saved.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ModelLoadError(f"{prompts_file}: default_prompt_name {default!r} is not one of its prompts {sorted(prompts)}")
    return StFolder(_pooling_mode(path, pooling_config), bool(pooling_config.get("include_prompt", True)), dense,
                    max_seq, prompts, default)
