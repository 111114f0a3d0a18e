"""A stand-in Hugging Face Hub (tests/hub_standin.py) serving tiny models built here, and a runner
for ``steadyrank`` subprocesses pointed at it (``HF_ENDPOINT``) with their own Hub cache (``HF_HOME``).

The Hub itself cannot be reached from the test machines; the client is the real ``huggingface_hub``.
Every run is a fresh process because ``huggingface_hub`` reads ``HF_ENDPOINT``, ``HF_HOME`` and
``HF_HUB_OFFLINE`` once, at import."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hub_standin import StandInHub
from tests.tiers import e2e_fixture

REPO = "steadyrank-test/tiny-reranker"
GATED = "steadyrank-test/gated-reranker"
TINY_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                 max_position_embeddings=512)


def tiny_cross_encoder(folder: Path, seed: int) -> Path:
    """A tiny random BertForSequenceClassification (1 logit) with the bundled MiniLM's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from steadyrank.serve.runtime import bundled_embedder_path

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_embedder_path()), local_files_only=True)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(BertConfig(vocab_size=tokenizer.vocab_size, num_labels=1, **TINY_BERT)).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@dataclass(frozen=True)
class Commits:
    v1: str  # tagged v1
    main: str  # the head of main (other weights)


@pytest.fixture(scope="session")
def hub(tmp_path_factory) -> Iterator[StandInHub]:
    """The stand-in Hub: ``REPO`` with two commits (tag ``v1``, then ``main``) and the gated ``GATED``."""
    standin = StandInHub()
    root = tmp_path_factory.mktemp("hub-models")
    standin.commits = Commits(  # type: ignore[attr-defined]
        v1=standin.add_folder(REPO, tiny_cross_encoder(root / "v1", seed=0), refs=("main", "v1")),
        main=standin.add_folder(REPO, tiny_cross_encoder(root / "v2", seed=1), refs=("main",)),
    )
    standin.add_folder(GATED, root / "v1", gated=True)
    standin.start()
    yield standin
    standin.stop()


Run = Callable[..., subprocess.CompletedProcess]


@pytest.fixture()
def hf_home(tmp_path) -> Path:
    return tmp_path / "hf-home"


@pytest.fixture()
@e2e_fixture
def steadyrank(hub: StandInHub, hf_home: Path) -> Run:
    """``steadyrank ARGS…`` against the stand-in Hub with this test's Hub cache; keyword arguments:
    ``offline`` (HF_HUB_OFFLINE=1), ``token`` (HF_TOKEN), ``endpoint`` (another HF_ENDPOINT)."""

    def run(*args: str, offline: bool = False, token: str | None = None, endpoint: str | None = None,
            python: list[str] | None = None) -> subprocess.CompletedProcess:
        env = hub_env(endpoint or hub.url, hf_home, offline=offline, token=token)
        command = python or [sys.executable, "-m", "steadyrank.serve.cli", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)

    return run


def hub_env(endpoint: str, hf_home: Path, offline: bool = False, token: str | None = None) -> dict[str, str]:
    """The environment of a process using the stand-in Hub at ``endpoint`` and the cache ``hf_home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(hf_home), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_PROGRESS_BARS="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    if token is not None:
        env["HF_TOKEN"] = token
    return env
